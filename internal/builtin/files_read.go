package builtin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig reads the dimensions of the images read_file returns
	_ "image/jpeg"
	_ "image/png"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/tool"
)

const (
	readDefaultLimit = 2000
	readMaxLimit     = 100000
)

// readableImageTypes are the image formats read_file returns as image blocks, by the MIME type
// http.DetectContentType sniffs from their first bytes.
var readableImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

type readFile struct{ fileDeps }

type readFileArgs struct {
	Path   string `json:"path"`
	Offset *int64 `json:"offset"`
	Limit  *int64 `json:"limit"`
}

// readDetails is the Details of a read_file result (for logs and UIs).
type readDetails struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	MimeType   string `json:"mime_type"`
	FirstLine  int64  `json:"first_line,omitempty"`
	LastLine   int64  `json:"last_line,omitempty"`
	TotalLines *int64 `json:"total_lines,omitempty"`
}

func (t *readFile) Spec() tool.Spec {
	return fileSpec(tool.Spec{
		Name:  "read_file",
		Label: "Read file",
		Description: "Read a text file, shown with line numbers (cat -n style), or view an image (PNG, JPEG, GIF, WebP). " +
			"Shows up to 2000 lines from offset; use offset and limit to page through long files. " +
			"A file must be read before write_file, edit_file or multi_edit may change it.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "The file, relative to the working directory (absolute paths must lie inside it)."},
    "offset": {"type": "integer", "minimum": 1, "description": "The first line to show, counting from 1 (default 1)."},
    "limit": {"type": "integer", "minimum": 1, "maximum": %d, "description": "How many lines to show (default %d)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`, readMaxLimit, readDefaultLimit)),
		Documentation: readFileDoc,
		PromptHint: "Use read_file (not cat) to look at files; it numbers lines and shows images. " +
			"Read a file before changing it: write_file, edit_file and multi_edit refuse files this session has not read or that changed since.",
		Timeout: time.Minute,
	}, true)
}

func (t *readFile) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args readFileArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	offset, limit := int64(1), int64(readDefaultLimit)
	if args.Offset != nil {
		if offset = *args.Offset; offset < 1 {
			return nil, tool.Errorf(tool.KindInvalidArgs, "offset %d: lines are counted from 1", offset)
		}
	}
	if args.Limit != nil {
		if limit = *args.Limit; limit < 1 || limit > readMaxLimit {
			return nil, tool.Errorf(tool.KindInvalidArgs, "limit %d: must be between 1 and %d", limit, readMaxLimit)
		}
	}
	w, tg, guard, err := openFile(t.fileDeps, ctx, args.Path)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	f, fi, err := w.openRegular(tg)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, min(int64(sniffLen), fi.Size()))
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF {
		return nil, filePathError(tg.given, err)
	}
	head = head[:n]
	mime := http.DetectContentType(head)
	if readableImageTypes[mime] {
		return readImage(guard, tg, f, fi, head, mime)
	}
	if looksBinary(head) {
		// The model now knows what the file is; let it replace the file if it wants to.
		guard.record(tg.abs, fileStamp{size: fi.Size(), mtime: fi.ModTime()})
		return nil, tool.Errorf(tool.KindFailed,
			"%q is a binary file (%s, detected type %s); read_file shows text files and PNG, JPEG, GIF or WebP images. "+
				"Inspect it with execute_command (e.g. file, xxd | head) if you need to.", tg.given, sizeText(fi.Size()), mime)
	}
	if fi.Size() > maxTextFile && args.Offset == nil && args.Limit == nil {
		return nil, tool.Errorf(tool.KindInvalidArgs,
			"%q is %s, more than the %s read_file reads at once; read a part of it with offset and limit (e.g. offset 1, limit 500), or search it with grep",
			tg.given, sizeText(fi.Size()), sizeText(maxTextFile))
	}
	hr := &hashingReader{r: ctxReader{ctx, io.MultiReader(bytes.NewReader(head), f)}}
	if fi.Size() <= maxGuardHash {
		hr.h = sha256.New()
	}
	lr := &lineReader{r: bufio.NewReaderSize(hr, 64<<10), w: &strings.Builder{}, offset: offset, limit: limit}
	// Files that are not too large are read to the end, to count their lines and hash
	// them for the guard; larger ones stop once the window is shown.
	whole, err := lr.run(ctx, fi.Size() <= maxTextFile)
	if err != nil {
		if ctx.Err() != nil {
			return nil, callEndError(ctx)
		}
		return nil, filePathError(tg.given, err)
	}
	guard.record(tg.abs, stampFromHash(fi, hr, whole))
	details := readDetails{Path: tg.show(), Size: fi.Size(), MimeType: mime, FirstLine: lr.first, LastLine: lr.last}
	if whole {
		details.TotalLines = &lr.lines
	}
	switch {
	case lr.lines == 0:
		return fileResult(fmt.Sprintf("%s is empty (0 lines).", tg.show()), nil, details)
	case lr.shown == 0:
		if whole {
			return nil, tool.Errorf(tool.KindInvalidArgs, "offset %d is past the end of %q, which has %s", offset, tg.given, countOf(lr.lines, "line", "lines"))
		}
		return nil, tool.Errorf(tool.KindInvalidArgs, "offset %d is past the end of %q", offset, tg.given)
	}
	lr.notes(tg, fi, whole)
	return fileResult(strings.TrimRight(lr.w.String(), "\n"), nil, details)
}

// ctxReader fails once the call has ended. The line reader looks at the context
// between lines only, and one line of a sparse file can be terabytes long.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// lineReader renders the lines [offset, offset+limit) of a text in cat -n style,
// within outputBudget.
type lineReader struct {
	r             *bufio.Reader
	w             *strings.Builder
	offset, limit int64

	lines       int64  // lines seen
	shown       int64  // lines written
	first, last int64  // the line numbers of the first and last shown
	stopped     string // why lines after last are not shown: "limit" or "budget"
	cut         int    // lines cut at maxLineChars
	replaced    bool   // invalid UTF-8 or NUL shown as U+FFFD
	buf         []byte // reused for each line
}

// run reads lines until the window is shown (and, when toEnd is set, on to the end of
// the text); it reports whether it read everything.
func (lr *lineReader) run(ctx *tool.Context, toEnd bool) (bool, error) {
	for {
		if lr.lines%4096 == 0 && ctx.Err() != nil {
			return false, callEndError(ctx)
		}
		line, full, err := nextLine(lr.r, maxLineChars*utf8.UTFMax, lr.buf)
		lr.buf = line
		if full == 0 && len(line) == 0 && err == io.EOF {
			return true, nil
		}
		lr.lines++
		if lr.lines >= lr.offset && lr.stopped == "" {
			lr.show(line, full)
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if lr.stopped != "" && !toEnd {
			return false, nil
		}
	}
}

func (lr *lineReader) show(line []byte, full int) {
	if lr.shown >= lr.limit {
		lr.stopped = "limit"
		return
	}
	text, cut := cutLine(line, full)
	text, bad := sanitize([]byte(text))
	rendered := fmt.Sprintf("%6d\t%s", lr.lines, text)
	if cut > 0 {
		rendered += fmt.Sprintf(" … [line cut: %d more bytes]", cut)
	}
	if lr.shown > 0 && lr.w.Len()+len(rendered)+1 > outputBudget {
		lr.stopped = "budget"
		return
	}
	lr.w.WriteString(rendered)
	lr.w.WriteByte('\n')
	if cut > 0 {
		lr.cut++
	}
	lr.replaced = lr.replaced || bad
	lr.shown++
	lr.last = lr.lines
	if lr.first == 0 {
		lr.first = lr.lines
	}
}

// notes appends what the model needs to know about what it was not shown.
func (lr *lineReader) notes(tg fileTarget, fi fs.FileInfo, whole bool) {
	var notes []string
	more := lr.stopped != "" || (whole && lr.last < lr.lines)
	switch {
	case more && whole:
		notes = append(notes, fmt.Sprintf("[showing lines %d-%d of %d; continue with offset=%d]", lr.first, lr.last, lr.lines, lr.last+1))
	case more:
		notes = append(notes, fmt.Sprintf("[showing lines %d-%d; the file is %s and has more lines; continue with offset=%d]",
			lr.first, lr.last, sizeText(fi.Size()), lr.last+1))
	}
	if lr.stopped == "budget" {
		notes = append(notes, fmt.Sprintf("[the output limit of %s was reached before the requested lines were all shown]", sizeText(outputBudget)))
	}
	if lr.cut > 0 {
		notes = append(notes, fmt.Sprintf("[%s longer than %d characters %s cut]", countOf(lr.cut, "line", "lines"), maxLineChars, wasWere(lr.cut)))
	}
	if lr.replaced {
		notes = append(notes, "[the file is not all valid UTF-8 text: invalid bytes and NULs are shown as U+FFFD; edit_file and write_file would not preserve them]")
	}
	for _, n := range notes {
		lr.w.WriteString(n)
		lr.w.WriteByte('\n')
	}
}

// nextLine reads one line into buf[:0], keeping at most keep bytes of it; full is the
// length of the whole line without its newline. A last line without a newline ends
// with io.EOF. A "\r" before the newline is dropped.
func nextLine(r *bufio.Reader, keep int, buf []byte) (line []byte, full int, err error) {
	line = buf[:0]
	for {
		chunk, err := r.ReadSlice('\n')
		full += len(chunk)
		if room := keep - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil {
			full--
			if len(line) > full {
				line = line[:full]
			}
		}
		if len(line) == full && len(line) > 0 && line[len(line)-1] == '\r' {
			line, full = line[:len(line)-1], full-1
		}
		return line, full, err
	}
}

// cutLine shortens a line (of which line holds the start, full bytes in all) to
// maxLineChars characters; cut is how many bytes were left out.
func cutLine(line []byte, full int) (string, int) {
	if full <= maxLineChars && len(line) == full {
		return string(line), 0
	}
	chars, i := 0, 0
	for i < len(line) && chars < maxLineChars {
		_, size := utf8.DecodeRune(line[i:])
		i += size
		chars++
	}
	if i >= full {
		return string(line), 0
	}
	return string(line[:i]), full - i
}

// looksBinary tells binary content from text by its first bytes: a NUL byte, or more
// than one byte in ten not part of valid UTF-8.
func looksBinary(head []byte) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	head = head[:len(head)-incompleteTail(head)]
	invalid := 0
	for i := 0; i < len(head); {
		r, size := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && size == 1 {
			invalid++
		}
		i += size
	}
	return invalid*10 > len(head)
}

// readImage returns an image file as an image block.
func readImage(guard *fileGuard, tg fileTarget, f *os.File, fi fs.FileInfo, head []byte, mime string) (*tool.Result, error) {
	if fi.Size() > maxImageFile {
		guard.record(tg.abs, fileStamp{size: fi.Size(), mtime: fi.ModTime()})
		return nil, tool.Errorf(tool.KindFailed, "%q is a %s image of %s, larger than the %s read_file returns",
			tg.given, mime, overText(fi.Size(), maxImageFile), sizeText(maxImageFile))
	}
	rest, err := io.ReadAll(io.LimitReader(f, maxImageFile+1-int64(len(head))))
	if err != nil {
		return nil, filePathError(tg.given, err)
	}
	data := append(head, rest...)
	if len(data) > maxImageFile {
		return nil, tool.Errorf(tool.KindFailed, "%q grew beyond %s while it was read", tg.given, sizeText(maxImageFile))
	}
	guard.record(tg.abs, stampOf(fi, data))
	desc := fmt.Sprintf("Image %s (%s, %s", tg.show(), mime, sizeText(int64(len(data))))
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
		desc += fmt.Sprintf(", %dx%d pixels", cfg.Width, cfg.Height)
	}
	desc += ")."
	details, err := marshalNoEscape(readDetails{Path: tg.show(), Size: fi.Size(), MimeType: mime})
	if err != nil {
		return nil, err
	}
	return &tool.Result{
		Content: []tool.Content{
			{Type: tool.ContentText, Text: desc},
			{Type: tool.ContentImage, Data: base64.StdEncoding.EncodeToString(data), MimeType: mime},
		},
		Details: details,
	}, nil
}
