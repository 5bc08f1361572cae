package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The JSON tools work on an ordered document model, so that a document written back
// keeps its keys in their original order: a value is *jsonObject, *jsonArray, string,
// json.Number (the number exactly as written), bool or nil.

// jsonObject is a JSON object that remembers the order of its keys.
type jsonObject struct {
	keys []string
	vals map[string]any
}

func newJSONObject() *jsonObject { return &jsonObject{vals: map[string]any{}} }

// set adds or replaces a member; a new key goes last.
func (o *jsonObject) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := marshalNoEscape(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := marshalNoEscape(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// jsonArray is a JSON array; a pointer so that appending through a pointer to it
// changes the document.
type jsonArray struct{ items []any }

func (a *jsonArray) MarshalJSON() ([]byte, error) {
	if a.items == nil {
		return []byte("[]"), nil
	}
	return marshalNoEscape(a.items)
}

// maxJSONDepth bounds nesting, so that a hostile document cannot exhaust the stack.
const maxJSONDepth = 1000

// jsonSyntaxError is a document that is not valid JSON, with where it went wrong.
type jsonSyntaxError struct {
	line, col int
	msg       string
}

func (e *jsonSyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.line, e.col, e.msg)
}

// parseJSONDoc parses exactly one JSON value (surrounding whitespace allowed).
func parseJSONDoc(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSONValue(dec, 0)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("there is more data after the JSON value")
		}
	}
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("the document ends too early")
		}
		off := dec.InputOffset()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		line, col := lineCol(data, off)
		return nil, &jsonSyntaxError{line: line, col: col, msg: strings.TrimPrefix(err.Error(), "json: ")}
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("the document nests deeper than %d levels", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		o := newJSONObject()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("object key %v is not a string", kt)
			}
			v, err := decodeJSONValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			o.set(k, v)
		}
		_, err := dec.Token()
		return o, err
	case '[':
		a := &jsonArray{items: []any{}}
		for dec.More() {
			v, err := decodeJSONValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a.items = append(a.items, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return nil, fmt.Errorf("unexpected %q", d)
}

// lineCol converts a byte offset into a line and column, both from 1.
func lineCol(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// jsonTypeName names the type of a document value.
func jsonTypeName(v any) string {
	switch v.(type) {
	case *jsonObject:
		return "object"
	case *jsonArray:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// jsonPointer is a parsed RFC 6901 JSON Pointer: its reference tokens, unescaped.
// The empty pointer names the whole document.
type jsonPointer []string

// parsePointer parses an RFC 6901 pointer: "" or "/"-separated tokens in which "~1"
// stands for "/" and "~0" for "~"; any other "~" is an error. The URI fragment form
// ("#/a%20b") is accepted too.
func parsePointer(s string) (jsonPointer, error) {
	if strings.HasPrefix(s, "#") {
		u, err := url.PathUnescape(s[1:])
		if err != nil {
			return nil, fmt.Errorf("pointer %q: invalid percent-encoding in the URI fragment form", s)
		}
		s = u
	}
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("pointer %q is not valid UTF-8", s)
	}
	if s == "" {
		return jsonPointer{}, nil
	}
	if s[0] != '/' {
		return nil, fmt.Errorf("pointer %q must be empty (the whole document) or start with \"/\", e.g. \"/%s\"", s, escapeToken(s))
	}
	toks := strings.Split(s[1:], "/")
	for i, t := range toks {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("pointer %q: \"~\" in token %d must be followed by 0 (for ~) or 1 (for /)", s, i+1)
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return jsonPointer(toks), nil
}

func escapeToken(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// String is the pointer in its RFC 6901 string form.
func (p jsonPointer) String() string {
	var b strings.Builder
	for _, t := range p {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

// pointerError is a pointer that does not resolve in a document.
type pointerError struct {
	msg string
}

func (e *pointerError) Error() string { return e.msg }

func pointerErrorf(format string, args ...any) error {
	return &pointerError{msg: fmt.Sprintf(format, args...)}
}

// arrayIndex parses a token naming an element of an array of n elements: a decimal
// index without leading zeros, or "-" for the position after the last (n).
func arrayIndex(p jsonPointer, i int, n int) (int, error) {
	tok := p[i]
	if tok == "-" {
		return n, nil
	}
	if tok == "" || (len(tok) > 1 && tok[0] == '0') || strings.TrimLeft(tok, "0123456789") != "" {
		return 0, pointerErrorf("%q: token %q is not an array index (the value at %q is an array; use 0, 1, … or - for the end)",
			p.String(), tok, p[:i].String())
	}
	idx, err := strconv.Atoi(tok)
	if err != nil {
		return 0, pointerErrorf("%q: index %s is out of range: the array at %q has %s", p.String(), tok, p[:i].String(), countOf(n, "element", "elements"))
	}
	return idx, nil
}

// member follows token i of p from cur, for reading.
func member(cur any, p jsonPointer, i int) (any, error) {
	tok := p[i]
	switch c := cur.(type) {
	case *jsonObject:
		v, ok := c.vals[tok]
		if !ok {
			return nil, pointerErrorf("%q does not resolve: the object at %q has no key %q%s", p.String(), p[:i].String(), tok, keyList(c))
		}
		return v, nil
	case *jsonArray:
		idx, err := arrayIndex(p, i, len(c.items))
		if err != nil {
			return nil, err
		}
		if idx >= len(c.items) {
			return nil, pointerErrorf("%q does not resolve: index %s is out of range, the array at %q has %s",
				p.String(), tok, p[:i].String(), countOf(len(c.items), "element", "elements"))
		}
		return c.items[idx], nil
	}
	return nil, pointerErrorf("%q does not resolve: the value at %q is %s %s, which has no member %q",
		p.String(), p[:i].String(), article(jsonTypeName(cur)), jsonTypeName(cur), tok)
}

func article(s string) string {
	if strings.ContainsRune("aeiou", rune(s[0])) {
		return "an"
	}
	return "a"
}

// keyList names some keys of an object, for error messages.
func keyList(o *jsonObject) string {
	if len(o.keys) == 0 {
		return " (the object is empty)"
	}
	keys := o.keys
	more := ""
	if len(keys) > 30 {
		keys, more = keys[:30], fmt.Sprintf(", … %d more", len(o.keys)-30)
	}
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = strconv.Quote(k)
	}
	return " (its keys: " + strings.Join(quoted, ", ") + more + ")"
}

// pointerGet returns the value p names in doc.
func pointerGet(doc any, p jsonPointer) (any, error) {
	cur := doc
	for i := range p {
		v, err := member(cur, p, i)
		if err != nil {
			return nil, err
		}
		cur = v
	}
	return cur, nil
}

// pointerSet puts val at p in doc and returns the new document and what it did:
// "added" (a new object member), "appended" (at the end of an array, by "-" or an
// index equal to its length), or "replaced". With create, missing object members on
// the way are created as empty objects.
func pointerSet(doc any, p jsonPointer, val any, create bool) (any, string, error) {
	if len(p) == 0 {
		return val, "replaced", nil
	}
	cur := doc
	for i := range len(p) - 1 {
		next, err := member(cur, p, i)
		if err != nil {
			o, isObj := cur.(*jsonObject)
			if !create || !isObj {
				return nil, "", err
			}
			next = newJSONObject()
			o.set(p[i], next)
		}
		cur = next
	}
	last := len(p) - 1
	switch c := cur.(type) {
	case *jsonObject:
		_, existed := c.vals[p[last]]
		c.set(p[last], val)
		if existed {
			return doc, "replaced", nil
		}
		return doc, "added", nil
	case *jsonArray:
		idx, err := arrayIndex(p, last, len(c.items))
		if err != nil {
			return nil, "", err
		}
		switch {
		case idx < len(c.items):
			c.items[idx] = val
			return doc, "replaced", nil
		case idx == len(c.items):
			c.items = append(c.items, val)
			return doc, "appended", nil
		}
		return nil, "", pointerErrorf("%q: index %d is out of range: the array at %q has %s; use %q to append",
			p.String(), idx, p[:last].String(), countOf(len(c.items), "element", "elements"), p[:last].String()+"/-")
	}
	return nil, "", pointerErrorf("%q cannot be set: the value at %q is %s %s, not an object or array",
		p.String(), p[:last].String(), article(jsonTypeName(cur)), jsonTypeName(cur))
}
