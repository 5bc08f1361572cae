package jsontext

import (
	"bytes"
	"encoding/json"
	"reflect"
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
// Every object's keys are matched regardless of case; FindDuplicateIn knows better
// where the type b is decoded into is known.
func FindDuplicate(b []byte) *Duplicate { return FindDuplicateIn(b, nil) }

// FindDuplicateIn is FindDuplicate for b decoded into a value of type t, matching
// keys as encoding/json does: an object read into a struct regardless of case, one
// read into a map or an interface as written (HTTP_PROXY and http_proxy are two keys
// of an env map, and both are kept). A value of type json.RawMessage is passed on as
// written, not decoded here: its objects are not looked into. Where the type is not
// known (t nil, a key that names no field, a type with its own UnmarshalJSON) keys
// are matched regardless of case.
func FindDuplicateIn(b []byte, t reflect.Type) *Duplicate {
	type frame struct {
		keys      map[string]string // folded key → as written; nil for an array
		path      string
		index     int // the next element's, in an array
		key       string
		expectKey bool // in an object, the next string is a key
		typ       reflect.Type
		exact     bool // keys as written (a map's)
		skip      int  // > 0: inside a json.RawMessage value, nothing checked
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
	// next is the type of the value about to be read (nil: not known).
	next := func() reflect.Type {
		if len(stack) == 0 {
			return t
		}
		f := stack[len(stack)-1]
		return childType(f.typ, f.key)
	}
	skipping := func() int {
		if len(stack) == 0 {
			return 0
		}
		return stack[len(stack)-1].skip
	}
	push := func(object bool) {
		f := &frame{path: at(), typ: deref(next()), skip: skipping()}
		if f.skip > 0 || f.typ == rawMessage {
			f.skip++
		}
		if object {
			f.keys, f.expectKey = map[string]string{}, true
			f.exact = f.typ != nil && (f.typ.Kind() == reflect.Map || f.typ.Kind() == reflect.Interface)
		}
		stack = append(stack, f)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if n := len(stack); n > 0 && stack[n-1].expectKey {
			if k, ok := tok.(string); ok {
				f := stack[n-1]
				folded := k
				if !f.exact {
					folded = foldKey(k)
				}
				if first, ok := f.keys[folded]; ok && f.skip == 0 {
					return &Duplicate{Key: k, First: first, Path: f.path}
				}
				f.keys[folded], f.key, f.expectKey = k, k, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			push(true)
		case json.Delim('['):
			push(false)
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

var (
	rawMessage  = reflect.TypeFor[json.RawMessage]()
	unmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

// deref is t without its pointers; nil for a type that decodes itself (its keys are
// not known here).
func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessage {
		return t
	}
	if t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	return t
}

// childType is the type of the value at key (an object's) or of an element (an
// array's) in a container of type t: nil when not known.
func childType(t reflect.Type, key string) reflect.Type {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array:
		if t == rawMessage {
			return nil
		}
		return t.Elem()
	case reflect.Interface:
		return t // an object or array in an interface decodes as map[string]any, []any
	case reflect.Struct:
		if f, ok := fieldNamed(t, key); ok {
			return f.Type
		}
	}
	return nil
}

// fieldNamed finds the field encoding/json fills from key in struct t: by its JSON
// name written alike, else regardless of case, promoted fields of embedded structs
// included.
func fieldNamed(t reflect.Type, key string) (reflect.StructField, bool) {
	var folded *reflect.StructField
	var walk func(t reflect.Type) (reflect.StructField, bool)
	walk = func(t reflect.Type) (reflect.StructField, bool) {
		// A struct's own fields come before those of the structs it embeds.
		var embedded []reflect.Type
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				embedded = append(embedded, f.Type)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if name == key {
				return f, true
			}
			if folded == nil && foldKey(name) == foldKey(key) {
				folded = &f
			}
		}
		for _, et := range embedded {
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() != reflect.Struct {
				continue
			}
			if sf, ok := walk(et); ok {
				return sf, true
			}
		}
		return reflect.StructField{}, false
	}
	if f, ok := walk(t); ok {
		return f, true
	}
	if folded != nil {
		return *folded, true
	}
	return reflect.StructField{}, false
}
