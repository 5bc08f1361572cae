package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/toolserverd/toolserverd/internal/jsontext"
)

// decodeJSON reads one JSON object from the body into v: the size is capped, unknown
// fields and trailing data are rejected, and each failure maps to 400, 413 or 415 with
// a message that says what is wrong and where.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	b, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	return decodeBytes(b, limit, v)
}

// decodeBytes is decodeBody for a body already read: a wrong type is located with
// array indexes (calls[2].name), which encoding/json leaves out.
func decodeBytes(b []byte, limit int64, v any) error {
	// The body is in memory: its first byte is found in place, and the decoder reads
	// it without the 4 KiB buffer decodeBody puts in front of a stream.
	first := byte(0)
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			first = c
			break
		}
	}
	err := decodeFrom(bytes.NewReader(b), first, limit, v)
	var ae *apiError
	if errors.As(err, &ae) && ae.typ != nil {
		ae.Message = typeMessage(ae.typ, locate(b, ae.typ))
	}
	return err
}

// decodeJSONOnce is decodeJSON for a body where a key sent twice must not pass with
// the last value winning (encoding/json's way, regardless of case): a security
// decision, which a proxy or log reading the first value would tell apart from what
// the daemon did. Such a body is a 400 naming the key.
func decodeJSONOnce(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	b, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	if err := decodeBytes(b, limit, v); err != nil {
		return err
	}
	return refuseDuplicateKeys(b, reflect.TypeOf(v))
}

// refuseDuplicateKeys is a 400 naming a key b, decoded into a value of type t, holds
// twice in one object (as encoding/json matches a struct's fields, regardless of case;
// a map's keys as written), nil when it has none.
func refuseDuplicateKeys(b []byte, t reflect.Type) error {
	d := jsontext.FindDuplicateIn(b, t)
	if d == nil {
		return nil
	}
	msg := "duplicate key " + strconv.Quote(d.Key)
	if d.First != d.Key {
		msg += " (the same field as " + strconv.Quote(d.First) + ")"
	}
	if d.Path != "" {
		msg += " in " + d.Path
	}
	return errorf(CodeInvalidJSON, msg+": send each field once")
}

// checkContentType accepts JSON media types and an absent header.
func checkContentType(ct string) error {
	if ct == "" || ct == "application/json" { // what nearly every client sends
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return errorf(CodeUnsupportedMedia, fmt.Sprintf("Content-Type %q is not supported; send application/json", ct))
	}
	return nil
}

func decodeBody(body io.Reader, limit int64, v any) error {
	br := bufio.NewReader(body)
	return decodeFrom(br, firstByte(br), limit, v)
}

// decodeFrom is decodeBody once the first byte of the body that is not JSON
// whitespace is known (0: none).
func decodeFrom(body io.Reader, first byte, limit int64, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, limit)
	}
	if first == 'n' { // null decodes into anything as "nothing sent"; it is no object
		return errorf(CodeInvalidJSON, "request body must be a JSON object, not null")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonError(err, limit)
		}
		return errorf(CodeInvalidJSON, "request body must hold a single JSON object; found data after it")
	}
	return nil
}

// firstByte returns the first byte of br that is not JSON whitespace, leaving it unread
// (0 when there is none).
func firstByte(br *bufio.Reader) byte {
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0
		}
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			_ = br.UnreadByte()
			return c
		}
	}
}

// decodeOptionalJSON is decodeJSON for a body that may be absent: an empty body (by
// Content-Length, or chunked with nothing in it) leaves v as it is.
func decodeOptionalJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	b, err := readBody(w, r, limit)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return err
	}
	return decodeBytes(b, limit, v)
}

// readBody reads the whole body, for handlers that pass it on unparsed: the size is
// capped like decodeJSON's (413 beyond it), and a body that does not arrive within the
// server's read deadline (read_body_timeout) is a 408.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		dropRest(r.Body)
		return nil, tooLarge(limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, errorf(CodeRequestTimeout, "the request body did not arrive within the server's read_body_timeout; send it whole without pausing")
	case err != nil:
		return nil, errorf(CodeBadRequest, "reading the request body: "+err.Error())
	}
	return b, nil
}

// maxDroppedBody bounds how much of a too-large body is read and dropped.
const maxDroppedBody = 64 << 20

// dropRest reads and drops what is left of a body past the size limit, up to
// maxDroppedBody (and within the read deadline). Most HTTP clients send a whole body
// before they read the answer; a connection closed with part of it unread is reset by
// the kernel, and such a client sees "connection reset" or "broken pipe" instead of
// the 413 telling it what is wrong.
func dropRest(body io.Reader) {
	_, _ = io.CopyN(io.Discard, body, maxDroppedBody)
}

// drainBodyMiddleware reads and drops what a handler left of the request body, as
// dropRest does: an answer given before the body is read (401 for a wrong key, 405)
// would otherwise reach a client that sends its whole body first as a reset
// connection. A client that sent "Expect: 100-continue" waits for leave to send its
// body; it is not asked to send one only to have it dropped.
func drainBodyMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if r.Body != nil && r.Body != http.NoBody && !strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
			dropRest(r.Body)
		}
	})
}

func tooLarge(limit int64) *apiError {
	return errorf(CodeTooLarge, fmt.Sprintf("request body is larger than %d bytes", limit))
}

func jsonError(err error, limit int64) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		mbe    *http.MaxBytesError
	)
	switch {
	case errors.As(err, &mbe):
		return tooLarge(limit)
	case errors.As(err, &syntax):
		return errorf(CodeInvalidJSON, fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, err))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(CodeInvalidJSON, "malformed JSON: the body ends in the middle of a value")
	case errors.Is(err, io.EOF):
		return errorf(CodeInvalidJSON, "request body is empty; send a JSON object")
	case errors.As(err, &typ):
		e := errorf(CodeInvalidJSON, typeMessage(typ, typ.Field))
		e.typ = typ
		return e
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(CodeInvalidJSON, "unknown field "+strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return errorf(CodeInvalidJSON, "malformed JSON: "+err.Error())
}

func typeMessage(typ *json.UnmarshalTypeError, field string) string {
	if field == "" {
		field = "(top level)"
	}
	return fmt.Sprintf("field %s must be %s, not JSON %s", field, typeWord(typ.Type.String()), typ.Value)
}

// locate finds where in body the value of a type error is: its field path with the
// index of every array on the way (calls[2].name), the first value of the wrong JSON
// type along typ.Field. It falls back to typ.Field.
func locate(body []byte, typ *json.UnmarshalTypeError) string {
	var doc any
	if json.Unmarshal(body, &doc) != nil || typ.Field == "" {
		return typ.Field
	}
	kind, _, _ := strings.Cut(typ.Value, " ") // "number 1.5": the kind is number
	if p, ok := findKind(doc, strings.Split(typ.Field, "."), kind, ""); ok {
		return p
	}
	return typ.Field
}

func findKind(v any, fields []string, kind, path string) (string, bool) {
	if arr, ok := v.([]any); ok {
		for i, e := range arr {
			if p, ok := findKind(e, fields, kind, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, true
			}
		}
		return "", false
	}
	if len(fields) == 0 {
		return path, jsonKind(v) == kind
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	for k, e := range obj {
		if strings.EqualFold(k, fields[0]) { // encoding/json matches keys so
			next := fields[0]
			if path != "" {
				next = path + "." + fields[0]
			}
			if p, ok := findKind(e, fields[1:], kind, next); ok {
				return p, true
			}
		}
	}
	return "", false
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

func typeWord(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map[") || strings.HasPrefix(goType, "struct") || strings.Contains(goType, "."):
		return "an object"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	}
	return goType
}

// pathParam is a route parameter, decoded. chi matches the escaped path when the
// request's differs from Go's own encoding of it (r.URL.RawPath is set, as for
// "functions.read%3A0" from encodeURIComponent), and its parameters are then still
// escaped.
func pathParam(r *http.Request, key string) string {
	v := chi.URLParam(r, key)
	if r.URL.RawPath == "" {
		return v
	}
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// queryLimit is a listing's ?limit=: a number from 1 to most, or def when absent.
func queryLimit(q url.Values, def, most int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, errorf(CodeBadRequest, "limit must be a number from 1 to "+strconv.Itoa(most))
	}
	return n, nil
}
