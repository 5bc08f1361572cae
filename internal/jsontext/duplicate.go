package jsontext

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
)

// Duplicate is a key that an object of a JSON document holds twice, as
// encoding/json matches keys: regardless of case ("decision" and "Decision" fill one
// field, the last value winning).
type Duplicate struct {
	Key   string // the second occurrence, as written
	First string // the first, as written (equal to Key when written alike)
	Path  string // the object's place: "" for the top level, else as "calls[2].arguments"
}

// FindDuplicate returns the first key that appears twice in one object of the JSON
// document b, or nil when none does. It reads b token by token, without recursing;
// from where b stops being valid JSON it reads no further (decoding it reports that).
func FindDuplicate(b []byte) *Duplicate {
	type frame struct {
		keys      map[string]string // folded key → as written; nil for an array
		path      string
		index     int // the next element's, in an array
		key       string
		expectKey bool // in an object, the next string is a key
	}
	var stack []*frame
	// at is the path of the value about to be read.
	at := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		switch {
		case f.keys == nil:
			return f.path + "[" + strconv.Itoa(f.index) + "]"
		case f.path == "":
			return f.key
		}
		return f.path + "." + f.key
	}
	// valueRead moves the enclosing container past the value just read.
	valueRead := func() {
		if len(stack) == 0 {
			return
		}
		f := stack[len(stack)-1]
		if f.keys == nil {
			f.index++
		} else {
			f.expectKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		if n := len(stack); n > 0 && stack[n-1].expectKey {
			if k, ok := t.(string); ok {
				f := stack[n-1]
				folded := foldKey(k)
				if first, ok := f.keys[folded]; ok {
					return &Duplicate{Key: k, First: first, Path: f.path}
				}
				f.keys[folded], f.key, f.expectKey = k, k, false
				continue
			}
		}
		switch t {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]string{}, path: at(), expectKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{path: at()})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueRead()
		default:
			valueRead()
		}
	}
}

// foldKey maps a key to one form for all the keys encoding/json takes for it: each
// rune to the smallest of its simple case folds (K, k and the Kelvin sign alike).
func foldKey(k string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, k)
}
