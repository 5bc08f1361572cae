package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
)

// DecodeArgs decodes a call's arguments (empty means {}) into v, refusing fields v
// does not have. A number with a fraction or an exponent but an integer value ("2.0",
// "1e3"), which JSON Schema counts as an integer and models do write, decodes into an
// integer field like its integer spelling; encoding/json alone refuses it.
func DecodeArgs(args json.RawMessage, v any) error { return decodeArgs(args, v, true) }

// UnmarshalArgs is DecodeArgs that ignores fields v does not have, as json.Unmarshal
// does.
func UnmarshalArgs(args json.RawMessage, v any) error { return decodeArgs(args, v, false) }

func decodeArgs(args json.RawMessage, v any, strict bool) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	err := decodeInto(args, v, strict)
	var te *json.UnmarshalTypeError
	if err == nil || !errors.As(err, &te) || !strings.HasPrefix(te.Value, "number ") {
		return err
	}
	if fixed, ok := integralNumbers(args); ok {
		return decodeInto(fixed, v, strict)
	}
	return err
}

func decodeInto(args json.RawMessage, v any, strict bool) error {
	if !strict {
		// json.Unmarshal needs no Decoder and its buffer. It checks the whole input
		// before it decodes: when that fails (data after the value, or bad syntax), v
		// is untouched and the Decoder below answers as it always did.
		err := json.Unmarshal(args, v)
		if _, syntax := err.(*json.SyntaxError); !syntax { // Unmarshal returns it unwrapped
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("arguments hold more than one JSON value")
	}
	return nil
}

// maxExactInt is the largest integer a float64 holds exactly (2^53).
const maxExactInt = 1 << 53

// integralNumbers rewrites args with every number that has an integer value (within
// ±2^53) in integer spelling; ok is false when nothing changed.
func integralNumbers(args json.RawMessage) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return nil, false
	}
	changed := false
	var walk func(x any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case json.Number:
			if !strings.ContainsAny(string(x), ".eE") {
				return x
			}
			f, err := strconv.ParseFloat(string(x), 64)
			if err != nil || f != math.Trunc(f) || math.Abs(f) > maxExactInt {
				return x
			}
			changed = true
			return json.Number(strconv.FormatInt(int64(f), 10))
		}
		return x
	}
	doc = walk(doc)
	if !changed {
		return nil, false
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, false
	}
	return b, true
}
