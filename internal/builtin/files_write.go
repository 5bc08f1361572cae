package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/tool"
)

type writeFile struct{ fileDeps }

type writeFileArgs struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

// writeFileOutput is the structured result of write_file.
type writeFileOutput struct {
	Path    string `json:"path"`
	Created bool   `json:"created"`
	Bytes   int    `json:"bytes"`
	Lines   int    `json:"lines"`
	// KeptCRLF says LF line endings of the content were written as CRLF, as the
	// replaced file had them.
	KeptCRLF bool `json:"kept_crlf,omitempty"`
}

func (t *writeFile) Spec() tool.Spec {
	return fileSpec(tool.Spec{
		Name:  "write_file",
		Label: "Write file",
		Description: "Create a file, or replace the whole content of one. Missing parent directories are created. " +
			"An existing file must have been read in this session (read_file) and be unchanged since; " +
			"prefer edit_file for changes to part of a file. Replacing a file whose lines all end in CRLF keeps CRLF: " +
			"write LF line endings, they are converted.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "The file, relative to the working directory (absolute paths must lie inside it)."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`),
		Documentation: writeFileDoc,
		Timeout:       time.Minute,
	}, false)
}

func (t *writeFile) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args writeFileArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	if args.Content == nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "content is required (use \"\" for an empty file)")
	}
	w, tg, guard, err := openFile(t.fileDeps, ctx, args.Path)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	mode, created, err := w.mayReplace(tg, guard, "write_file")
	if err != nil {
		return nil, err
	}
	content := *args.Content
	// Models write LF; a file that used CRLF throughout keeps it (as edit_file does),
	// or replacing it would change every line.
	keptCRLF := false
	if !created && strings.Contains(strings.ReplaceAll(content, "\r\n", ""), "\n") && w.usesCRLF(tg) {
		content, keptCRLF = strings.ReplaceAll(strings.ReplaceAll(content, "\r\n", "\n"), "\n", "\r\n"), true
	}
	data := []byte(content)
	if err := w.commit(ctx, guard, tg, data, mode, true); err != nil {
		return nil, err
	}
	out := writeFileOutput{Path: tg.show(), Created: created, Bytes: len(data), Lines: countTextLines(content), KeptCRLF: keptCRLF}
	verb := "Overwrote"
	if created {
		verb = "Created"
	}
	eol := ""
	if keptCRLF {
		eol = ", CRLF line endings kept"
	}
	return fileResult(fmt.Sprintf("%s %s (%s, %s%s).", verb, out.Path, countOf(out.Lines, "line", "lines"), sizeText(int64(out.Bytes)), eol), out, nil)
}

// Precheck refuses, before anyone is asked to approve it, a write_file that would
// replace a file the session has not read (or that changed since): tool.Prechecker.
func (t *writeFile) Precheck(ctx *tool.Context, raw json.RawMessage) error {
	var args writeFileArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil // Run says what is wrong with the arguments
	}
	return precheckFile(t.fileDeps, ctx, args.Path, func(w *fileRoot, tg fileTarget, guard *fileGuard) error {
		_, _, err := w.mayReplace(tg, guard, "write_file")
		return err
	})
}

// precheckFile opens the session's file tg names and runs check on it: the shared
// part of the file tools' Prechecks. Nothing is written to the file. A call that
// passes waits for approval next, perhaps across a restart: the stamp the guard let
// it through on is kept in the store (fileGuard.keep) for its run to be checked
// against.
func precheckFile(d fileDeps, ctx *tool.Context, path string, check func(w *fileRoot, tg fileTarget, guard *fileGuard) error) error {
	w, tg, guard, err := openFile(d, ctx, path)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := check(w, tg, guard); err != nil {
		return err
	}
	guard.keep(tg.abs)
	return nil
}

// mayReplace checks that the session may write tg: either nothing is there yet, or a
// regular file the guard allows replacing. It returns the mode the new content gets
// and whether the file is new.
func (w *fileRoot) mayReplace(tg fileTarget, guard *fileGuard, toolName string) (fs.FileMode, bool, error) {
	fi, err := w.stat(tg)
	if err != nil {
		return 0, false, err
	}
	if fi == nil {
		return newFileMode, true, nil
	}
	if !fi.Mode().IsRegular() {
		return 0, false, w.notAFile(tg, fi.Mode())
	}
	v, err := guard.check(tg.abs, fi, func() ([]byte, error) {
		if fi.Size() > maxGuardHash {
			return nil, nil
		}
		data, _, err := w.readWhole(tg, maxGuardHash, toolName)
		return data, err
	})
	if err != nil {
		return 0, false, err
	}
	if v != guardOK {
		return 0, false, guard.refusal(v, tg, toolName)
	}
	return fi.Mode(), false, nil
}

// loadForEdit reads an existing text file the session may change: it must exist, be a
// regular file of at most maxTextFile bytes, be valid UTF-8 and pass the guard.
func (w *fileRoot) loadForEdit(tg fileTarget, guard *fileGuard, toolName string) ([]byte, fs.FileInfo, error) {
	fi, err := w.stat(tg)
	if err != nil {
		return nil, nil, err
	}
	if fi == nil {
		if !w.has("write_file") {
			return nil, nil, tool.Errorf(tool.KindNotFound, "%q does not exist", tg.given)
		}
		return nil, nil, tool.Errorf(tool.KindNotFound, "%q does not exist; create it with write_file", tg.given)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, w.notAFile(tg, fi.Mode())
	}
	data, fi, err := w.readWhole(tg, maxTextFile, toolName)
	if err != nil {
		return nil, nil, err
	}
	if !utf8.Valid(data) {
		line, _ := invalidUTF8At(data)
		return nil, nil, tool.Errorf(tool.KindFailed,
			"%q is not valid UTF-8 text (the first invalid byte is on line %d); %s only changes UTF-8 text files, as it could not keep other encodings intact. Nothing was written.",
			tg.given, line, toolName)
	}
	v, err := guard.check(tg.abs, fi, func() ([]byte, error) { return data, nil })
	if err != nil {
		return nil, nil, err
	}
	if v != guardOK {
		return nil, nil, guard.refusal(v, tg, toolName)
	}
	return data, fi, nil
}

// usesCRLF reports whether the text file tg ends every line with CRLF (and has at
// least one line ending). Binary files and files over maxTextFile do not.
func (w *fileRoot) usesCRLF(tg fileTarget) bool {
	f, fi, err := w.openRegular(tg)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi.Size() > maxTextFile {
		return false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTextFile+1))
	if err != nil || bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return false
	}
	n := bytes.Count(data, []byte("\n"))
	return n > 0 && bytes.Count(data, []byte("\r\n")) == n
}

// commit writes data to tg atomically and records the result in the guard, so that the
// session can go on changing the file without reading it again.
func (w *fileRoot) commit(ctx *tool.Context, guard *fileGuard, tg fileTarget, data []byte, mode fs.FileMode, mkdirs bool) error {
	if ctx.Err() != nil {
		return callEndError(ctx)
	}
	fi, err := w.writeAtomic(tg, data, mode, mkdirs)
	if err != nil {
		return err
	}
	guard.record(tg.abs, stampOf(fi, data))
	return nil
}

// invalidUTF8At finds the first byte of data that is not valid UTF-8: its line (from 1)
// and offset; -1 when there is none.
func invalidUTF8At(data []byte) (line, offset int) {
	line = 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return line, i
		}
		if r == '\n' {
			line++
		}
		i += size
	}
	return line, -1
}

// countTextLines counts lines the way an editor shows them: a final line without a newline
// counts, an empty text has none.
func countTextLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
