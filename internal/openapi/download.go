package openapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// isFileAnswer reports whether a 2xx answer is bytes the model cannot read, which a
// call with a working directory saves there: a PDF, an archive, any type that is not
// text (by its declared media type, or, when that says nothing, by its bytes), and an
// image or audio too large for a block of its own. head is what was read of the body:
// up to max_response_bytes, one byte more when there is more.
func (o *Operation) isFileAnswer(resp *http.Response, head []byte) bool {
	if resp.StatusCode/100 != 2 || len(head) == 0 {
		return false
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	mediaType = strings.ToLower(mediaType)
	cut := int64(len(head)) > o.maxBytes
	switch {
	case strings.HasPrefix(mediaType, "image/") || strings.HasPrefix(mediaType, "audio/"):
		return cut
	case isTextual(mediaType):
		return false
	case mediaType != "" && mediaType != "application/octet-stream" && mediaType != "binary/octet-stream" && !strings.HasPrefix(mediaType, "multipart/"):
		return true // application/pdf, application/zip, video/mp4, font/woff2 …
	}
	if cut {
		head = head[:o.maxBytes]
	}
	return bytes.IndexByte(head, 0) >= 0 || strings.HasPrefix(bodyText(mediaType, head), "[binary body")
}

// isTextual reports whether a media type is text a model reads: text/*, JSON, XML,
// YAML, forms, scripts and the like.
func isTextual(mt string) bool {
	if strings.HasPrefix(mt, "text/") || isJSON(mt) {
		return true
	}
	for _, suffix := range []string{"+json", "+xml", "+yaml", "+json-seq"} {
		if strings.HasSuffix(mt, suffix) {
			return true
		}
	}
	switch mt {
	case "application/xml", "application/yaml", "application/x-yaml", "application/toml", "application/x-ndjson", "application/ndjson",
		"application/jsonl", "application/x-jsonlines", "application/javascript", "application/x-javascript", "application/ecmascript",
		"application/x-www-form-urlencoded", "application/graphql", "application/sql", "application/x-sh", "application/x-httpd-php",
		"application/csv", "application/rtf", "application/x-tex", "application/xhtml+xml", "message/http":
		return true
	}
	return false
}

// maxDownloadName caps a file name taken from Content-Disposition, in bytes.
const maxDownloadName = 200

// safeFileName reports whether a name an API suggests (Content-Disposition) can be
// used as it is: one plain file name, no directory part ("../../x", "/etc/x",
// "a\\b"), no hidden or dot name, no control or invisible formatting characters
// (a right-to-left override that would show "txt.exe" as "exe.txt"), not too long.
func safeFileName(name string) bool {
	if name == "" || len(name) > maxDownloadName || !utf8.ValidString(name) || strings.TrimSpace(name) != name ||
		strings.HasPrefix(name, ".") || strings.HasPrefix(name, "-") || strings.ContainsAny(name, `/\:`) {
		return false
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// extensions are the file extensions of common binary media types, which the
// system's table (mime.ExtensionsByType) may lack or order oddly.
var extensions = map[string]string{
	"application/pdf": ".pdf", "application/zip": ".zip", "application/x-zip-compressed": ".zip",
	"application/x-tar": ".tar", "application/tar": ".tar", "application/gzip": ".gz", "application/x-gzip": ".gz",
	"application/x-bzip2": ".bz2", "application/x-xz": ".xz", "application/zstd": ".zst", "application/x-7z-compressed": ".7z",
	"application/octet-stream": ".bin", "binary/octet-stream": ".bin", "application/vnd.oci.image.layer.v1.tar": ".tar",
	"application/vnd.oci.image.layer.v1.tar+gzip": ".tar.gz", "application/msword": ".doc",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document":   ".docx",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":         ".xlsx",
	"application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
	"application/vnd.ms-excel": ".xls", "application/x-sqlite3": ".sqlite", "application/wasm": ".wasm",
	"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp", "image/tiff": ".tiff",
	"audio/mpeg": ".mp3", "audio/wav": ".wav", "audio/x-wav": ".wav", "audio/ogg": ".ogg", "audio/flac": ".flac",
	"video/mp4": ".mp4", "video/webm": ".webm", "font/woff2": ".woff2", "font/ttf": ".ttf",
}

// extensionOf is the file extension of a media type, ".bin" when none is known.
func extensionOf(mediaType string) string {
	if e, ok := extensions[mediaType]; ok {
		return e
	}
	if es, _ := mime.ExtensionsByType(mediaType); len(es) > 0 {
		return es[0]
	}
	return ".bin"
}

// downloadName is the file name an answer is saved under: the one its
// Content-Disposition gives when that is a plain file name (safeFileName), else the
// tool's name and the call's id with the media type's extension. suggested is the
// API's name when it was not used.
func (o *Operation) downloadName(ctx *tool.Context, resp *http.Response, mediaType string) (name, suggested string) {
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		// mime decodes filename* (RFC 5987, UTF-8) into filename.
		if fn := params["filename"]; fn != "" {
			if safeFileName(fn) {
				return fn, ""
			}
			suggested = fn
		}
	}
	id := ""
	if ctx != nil {
		id = ctx.CallID
		if id == "" {
			id = ctx.ToolCallID
		}
	}
	if !safeFileName(id) {
		var b [6]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	return o.spec.Name + "-" + id + extensionOf(mediaType), suggested
}

// unsavedAnswer is a 2xx answer the model cannot read (isFileAnswer) for a session
// that may change nothing (tool.Context.ReadOnly, explore mode): a GET counts as
// read-only, so it runs there, but saving its answer would write to the working
// directory. The body is named in the text, as without a working directory, and the
// text says why it was not saved. head is what was read of the body.
func (o *Operation) unsavedAnswer(resp *http.Response, head []byte) *tool.Result {
	ct := resp.Header.Get("Content-Type")
	mediaType, _, _ := mime.ParseMediaType(ct)
	mediaType = strings.ToLower(mediaType)
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	size := fmt.Sprintf("%d bytes", len(head))
	if int64(len(head)) > o.maxBytes {
		size = fmt.Sprintf("more than %d bytes", o.maxBytes)
		if resp.ContentLength > o.maxBytes {
			size = fmt.Sprintf("%d bytes", resp.ContentLength)
		}
	}
	info := map[string]any{"status": resp.StatusCode, "content_type": ct, "method": o.method, "url": o.redacted(resp.Request.URL),
		"bytes": min(int64(len(head)), o.maxBytes), "cut": int64(len(head)) > o.maxBytes, "saved": false}
	text := fmt.Sprintf("HTTP %d %s from %s %s: [binary body: %s of %s]\n[not saved in the working directory: this session's permission mode "+
		"(explore) lets it change nothing, and saving the answer would write a file; its bytes are not kept]",
		resp.StatusCode, http.StatusText(resp.StatusCode), o.method, o.redacted(resp.Request.URL), size, mediaType)
	res := tool.TextResult(text)
	res.Details, _ = json.Marshal(info)
	return res
}

// saveAnswer writes a 2xx answer that the model cannot read (isFileAnswer) to the
// call's working directory, reading the rest of its body (head is what was read),
// and says where it is. An answer that cannot be kept (larger than max_file_bytes, a
// working directory that cannot be written) is an error result that says the API
// did answer; one whose reading fails leaves no file and is unfinished, like any.
func (o *Operation) saveAnswer(ctx *tool.Context, callCtx context.Context, budget time.Duration, ws *workspace,
	req *http.Request, resp *http.Response, head []byte) *tool.Result {
	ct := resp.Header.Get("Content-Type")
	mediaType, _, _ := mime.ParseMediaType(ct)
	mediaType = strings.ToLower(mediaType)
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	name, suggested := o.downloadName(ctx, resp, mediaType)
	info := map[string]any{"status": resp.StatusCode, "content_type": ct, "method": o.method, "url": o.redacted(resp.Request.URL)}
	if suggested != "" {
		info["suggested_filename"] = clip(suggested, 300)
	}
	answered := fmt.Sprintf("HTTP %d %s from %s %s", resp.StatusCode, http.StatusText(resp.StatusCode), o.method, o.redacted(resp.Request.URL))
	f, err := ws.save(name, mediaType, head, resp.Body, o.maxFileBytes)
	var re readError
	if errors.As(err, &re) {
		why, kind := fmt.Sprintf("the connection failed (%v)", unwrapURLError(re.err)), tool.KindUnavailable
		if callCtx.Err() != nil {
			kind, why = stopKind(ctx), stopped(ctx, budget)
		}
		res := o.unfinished(kind, why, req, resp, head, true)
		res.Content[0].Text += "\n[the answer was to be saved as a file in " + DownloadDir + "; nothing was kept]"
		return res
	}
	if err != nil {
		var why string
		var te *tool.Error
		switch {
		case errors.Is(err, errTooLarge):
			why = fmt.Sprintf("it is larger than the %d bytes a saved answer may be (max_file_bytes)", o.maxFileBytes)
		case errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission):
			why = "the working directory is read-only"
		case errors.As(err, &te):
			why = te.Message
		default:
			why = err.Error()
		}
		info["saved"] = false
		text := fmt.Sprintf("%s: the answer (%s) could not be saved in the working directory: %s; its bytes are not kept", answered, mediaType, why)
		if o.mayAct() {
			text += "\n[the API carried out the request: only keeping its answer failed; check before calling again]"
		}
		res := tool.ErrorResult(tool.KindFailed, "%s", text)
		res.Details, _ = json.Marshal(info)
		return res
	}
	info["saved_to"], info["bytes"], info["sha256"] = f.Path, f.Bytes, f.SHA256
	text := fmt.Sprintf("%s: the answer (%s, %d bytes) is saved in the working directory as %s", answered, mediaType, f.Bytes, f.Path)
	if suggested != "" {
		text += fmt.Sprintf(" (the API's file name %q was not used: it is not a plain file name)", clip(suggested, 100))
	} else if !strings.HasSuffix(f.Path, "/"+name) {
		text += fmt.Sprintf(" (%s/%s was already there)", DownloadDir, name)
	}
	text += `; read it with the file tools, or send it to an API as a file argument {"path": "` + f.Path + `"}`
	res := tool.TextResult(text)
	res.Structured, _ = json.Marshal(f)
	res.Details, _ = json.Marshal(info)
	return res
}
