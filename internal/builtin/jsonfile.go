package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// utf8BOM is kept in front of a document that had it.
var utf8BOM = []byte("\xef\xbb\xbf")

type jsonRead struct{ fileDeps }

type jsonReadArgs struct {
	Path    string `json:"path"`
	Pointer string `json:"pointer"`
}

// jsonReadOutput is the structured result of json_read.
type jsonReadOutput struct {
	Path    string          `json:"path"`
	Pointer string          `json:"pointer"`
	Type    string          `json:"type"`
	Value   json.RawMessage `json:"value,omitempty"`
	// Omitted says the value was too large to include; the text shows a part of it.
	Omitted bool `json:"omitted,omitempty"`
}

func (t *jsonRead) Spec() tool.Spec {
	return fileSpec(tool.Spec{
		Name:  "json_read",
		Label: "Read JSON",
		Description: "Read a JSON file, or the part of it a JSON Pointer (RFC 6901) names, e.g. /dependencies or /items/0/name. " +
			"Returns the value pretty-printed and as structured content. Counts as reading the file for write_file and json_write.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "The JSON file, relative to the working directory."},
    "pointer": {"type": "string", "description": "JSON Pointer to the value to read: \"\" (default) is the whole document, /a/0/b descends by key and array index; write ~1 for / and ~0 for ~ inside a key."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
		Documentation: jsonReadDoc,
		Timeout:       time.Minute,
	}, true)
}

func (t *jsonRead) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args jsonReadArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	ptr, err := parsePointer(args.Pointer)
	if err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "%v", err)
	}
	w, tg, guard, err := openFile(t.fileDeps, ctx, args.Path)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	data, fi, err := w.readWhole(tg, maxTextFile, "json_read")
	if err != nil {
		return nil, err
	}
	doc, err := parseJSONFile(tg, data, "json_read")
	if err != nil {
		return nil, err
	}
	guard.record(tg.abs, stampOf(fi, data))
	v, err := pointerGet(doc, ptr)
	if err != nil {
		return nil, tool.Errorf(tool.KindNotFound, "%s: %v", tg.show(), err)
	}
	compact, err := marshalNoEscape(v)
	if err != nil {
		return nil, err
	}
	out := jsonReadOutput{Path: tg.show(), Pointer: ptr.String(), Type: jsonTypeName(v)}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, compact, "", "  "); err != nil {
		return nil, err
	}
	text := pretty.String()
	if pretty.Len() <= outputBudget {
		out.Value = compact
	} else {
		out.Omitted = true
		cut := strings.LastIndexByte(text[:outputBudget], '\n')
		text = text[:max(cut, 0)] + fmt.Sprintf("\n[the value is %s pretty-printed; only its start is shown. It is %s; read a part of it with a longer pointer]",
			sizeText(int64(pretty.Len())), summarizeJSON(v))
	}
	return fileResult(text, out, nil)
}

// summarizeJSON describes a large value so the model can pick a part of it.
func summarizeJSON(v any) string {
	switch c := v.(type) {
	case *jsonObject:
		return fmt.Sprintf("an object with %s%s", countOf(len(c.keys), "key", "keys"), keyList(c))
	case *jsonArray:
		return "an array of " + countOf(len(c.items), "element", "elements")
	}
	return article(jsonTypeName(v)) + " " + jsonTypeName(v)
}

// parseJSONFile parses a file's bytes as one JSON document (a UTF-8 byte order mark
// is allowed), with errors a model can act on.
func parseJSONFile(tg fileTarget, data []byte, toolName string) (any, error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	if !utf8.Valid(data) {
		line, _ := invalidUTF8At(data)
		return nil, tool.Errorf(tool.KindFailed, "%q is not valid UTF-8 (the first invalid byte is on line %d), so it is not JSON", tg.given, line)
	}
	doc, err := parseJSONDoc(data)
	if err != nil {
		return nil, tool.Errorf(tool.KindFailed,
			"%q is not valid JSON (%v). %s reads strict JSON only (no comments, no trailing commas); use read_file and edit_file for other formats.",
			tg.given, err, toolName)
	}
	return doc, nil
}

type jsonWrite struct{ fileDeps }

type jsonWriteArgs struct {
	Path          string          `json:"path"`
	Pointer       *string         `json:"pointer"`
	Value         json.RawMessage `json:"value"`
	CreateMissing bool            `json:"create_missing"`
}

// jsonWriteOutput is the structured result of json_write.
type jsonWriteOutput struct {
	Path        string `json:"path"`
	Pointer     string `json:"pointer"`
	Action      string `json:"action"`
	CreatedFile bool   `json:"created_file"`
}

func (t *jsonWrite) Spec() tool.Spec {
	return fileSpec(tool.Spec{
		Name:  "json_write",
		Label: "Write JSON",
		Description: "Set the value at a JSON Pointer in a JSON file: adds an object member, replaces an existing value or array element, " +
			"appends to an array with /-; pointer \"\" replaces the whole document. The rest of the document is kept (key order and indentation too). " +
			"An existing file must have been read (json_read or read_file) in this session and be unchanged since.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "The JSON file, relative to the working directory."},
    "pointer": {"type": "string", "description": "JSON Pointer (RFC 6901) to the value to set, e.g. /scripts/test, /items/0, /items/- (append), or \"\" for the whole document."},
    "value": {"description": "The JSON value to put there (any type)."},
    "create_missing": {"type": "boolean", "description": "Create missing parent objects along the pointer, and the file itself if it does not exist (default false)."}
  },
  "required": ["path", "pointer", "value"],
  "additionalProperties": false
}`),
		Documentation: jsonWriteDoc,
		Timeout:       time.Minute,
	}, false)
}

// Precheck refuses, before anyone is asked to approve it, a change to an existing
// file that is not read as it is now (tool.Prechecker); a new file needs no read.
func (t *jsonWrite) Precheck(ctx *tool.Context, raw json.RawMessage) error {
	var args jsonWriteArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil // Run says what is wrong with the arguments
	}
	return precheckFile(t.fileDeps, ctx, args.Path, func(w *fileRoot, tg fileTarget, guard *fileGuard) error {
		fi, err := w.stat(tg)
		if err != nil || fi == nil {
			return err
		}
		_, _, err = w.loadForEdit(tg, guard, "json_write")
		return err
	})
}

func (t *jsonWrite) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args jsonWriteArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	if args.Pointer == nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "pointer is required (\"\" for the whole document)")
	}
	if len(bytes.TrimSpace(args.Value)) == 0 {
		return nil, tool.Errorf(tool.KindInvalidArgs, "value is required (any JSON value, null included)")
	}
	ptr, err := parsePointer(*args.Pointer)
	if err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "%v", err)
	}
	val, err := parseJSONDoc(args.Value)
	if err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "value: %v", err)
	}
	w, tg, guard, err := openFile(t.fileDeps, ctx, args.Path)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	fi, err := w.stat(tg)
	if err != nil {
		return nil, err
	}
	out := jsonWriteOutput{Path: tg.show(), Pointer: ptr.String(), CreatedFile: fi == nil}
	style := jsonStyle{indent: "  ", newline: true}
	var doc any = newJSONObject()
	mode := newFileMode
	if fi == nil && len(ptr) > 0 && !args.CreateMissing {
		return nil, tool.Errorf(tool.KindNotFound, "%q does not exist; set create_missing to create it, or write the whole document with pointer \"\"", tg.given)
	}
	if fi != nil {
		data, fi, err := w.loadForEdit(tg, guard, "json_write")
		if err != nil {
			return nil, err
		}
		mode = fi.Mode()
		style = detectJSONStyle(data)
		if len(ptr) > 0 {
			if doc, err = parseJSONFile(tg, data, "json_write"); err != nil {
				return nil, err
			}
		}
	}
	doc, out.Action, err = pointerSet(doc, ptr, val, args.CreateMissing)
	if err != nil {
		var pe *pointerError
		if errors.As(err, &pe) {
			return nil, tool.Errorf(tool.KindNotFound, "%s: %v. Nothing was written.", tg.show(), err)
		}
		return nil, err
	}
	data, err := style.encode(doc)
	if err != nil {
		return nil, err
	}
	if err := w.commit(ctx, guard, tg, data, mode, true); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("Set %q in %s (%s).", out.Pointer, out.Path, out.Action)
	if out.CreatedFile {
		what = fmt.Sprintf("Created %s and set %q (%s).", out.Path, out.Pointer, out.Action)
	}
	return fileResult(what, out, nil)
}

// jsonStyle is how a document was laid out, so a rewrite keeps the layout.
type jsonStyle struct {
	indent  string // one level of indentation; "" writes compact JSON
	newline bool   // end with a newline
	bom     bool   // start with a UTF-8 byte order mark
}

// detectJSONStyle guesses the layout of a document: compact when the value holds no
// newline, else the leading whitespace of the first indented line as one level.
func detectJSONStyle(data []byte) jsonStyle {
	s := jsonStyle{bom: bytes.HasPrefix(data, utf8BOM)}
	data = bytes.TrimPrefix(data, utf8BOM)
	trimmed := bytes.TrimSpace(data)
	s.newline = bytes.HasSuffix(data, []byte("\n"))
	if !bytes.Contains(trimmed, []byte("\n")) {
		return s
	}
	s.indent = "  "
	for _, line := range bytes.Split(trimmed, []byte("\n"))[1:] {
		ws := line[:len(line)-len(bytes.TrimLeft(line, " \t"))]
		if len(ws) > 0 && len(ws) < len(line) {
			if ws[0] == '\t' {
				s.indent = "\t"
			} else {
				s.indent = strings.Repeat(" ", min(len(ws), 8))
			}
			break
		}
	}
	return s
}

// encode writes a document in the style.
func (s jsonStyle) encode(doc any) ([]byte, error) {
	compact, err := marshalNoEscape(doc)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if s.bom {
		b.Write(utf8BOM)
	}
	if s.indent == "" {
		b.Write(compact)
	} else if err := json.Indent(&b, compact, "", s.indent); err != nil {
		return nil, err
	}
	if s.newline {
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}
