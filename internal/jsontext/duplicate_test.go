package jsontext

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestFindDuplicate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want *Duplicate
	}{
		{`{"decision":"approve","reason":"x"}`, nil},
		{`{"decision":"approve","decision":"deny"}`, &Duplicate{Key: "decision", First: "decision"}},
		{`{"decision":"deny","Decision":"approve"}`, &Duplicate{Key: "Decision", First: "decision"}},
		{"{\"kind\":1,\"\u212Aind\":2}", &Duplicate{Key: "\u212Aind", First: "kind"}},                 // the Kelvin sign folds to k
		{"{\"decision\":1,\"deci\u017Fion\":2}", &Duplicate{Key: "deci\u017Fion", First: "decision"}}, // long s folds to s
		{`{"":1,"":2}`, &Duplicate{Key: "", First: ""}},
		// A value equal to a key is no key; the same key in two objects is no duplicate.
		{`{"a":"b","b":"a","c":{"a":1,"b":[{"a":1},{"a":2}]}}`, nil},
		{`{"calls":[{"id":"a"},{"id":"b","arguments":{"x":1,"y":{},"X":2}}]}`, &Duplicate{Key: "X", First: "x", Path: "calls[1].arguments"}},
		{`[[1,{"a":[]}],{"b":{"c":null,"c":true}}]`, &Duplicate{Key: "c", First: "c", Path: "[1].b"}},
		{`{"a":{"b":1},"a":2}`, &Duplicate{Key: "a", First: "a"}},
		// Invalid text: nothing past where it breaks.
		{`{"a":1,,"a":2}`, nil},
		{`{"a":1`, nil},
		{``, nil},
	} {
		got := FindDuplicate([]byte(tc.in))
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("FindDuplicate(%s) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestFindDuplicateFoldsAsEncodingJSON: what FindDuplicate calls one key is what
// encoding/json fills one field with.
func TestFindDuplicateFoldsAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"Decision", "DECISION", "deci\u017Fion", "decision"} {
		var v struct {
			Decision string `json:"decision"`
		}
		if err := json.Unmarshal([]byte(`{"`+k+`":"x"}`), &v); err != nil || v.Decision != "x" {
			t.Fatalf("encoding/json does not take %q for decision: %v", k, err)
		}
		if d := FindDuplicate([]byte(`{"decision":"a","` + k + `":"b"}`)); d == nil {
			t.Errorf("%q after decision is not found a duplicate", k)
		}
	}
}

// TestFindDuplicateIn: a struct's keys are matched regardless of case, a map's and an
// interface's as written, a json.RawMessage's not at all; a field is found by its JSON
// name, a struct's own before an embedded one's.
func TestFindDuplicateIn(t *testing.T) {
	t.Parallel()
	type inner struct {
		Env  map[string]string `json:"env"`
		Meta map[string]any    `json:"meta"`
	}
	type shape struct {
		Mode  string          `json:"mode"`
		Raw   json.RawMessage `json:"raw"`
		Any   any             `json:"any"`
		Inner *inner          `json:"inner"`
		List  []inner         `json:"list"`
	}
	type outer struct {
		shape
		Raw []inner `json:"raw"` // shadows shape's
	}
	ts, to := reflect.TypeFor[shape](), reflect.TypeFor[outer]()
	for _, tc := range []struct {
		in   string
		typ  reflect.Type
		want *Duplicate
	}{
		{`{"mode":"a","Mode":"b"}`, ts, &Duplicate{Key: "Mode", First: "mode"}},
		{`{"inner":{"env":{"HTTP_PROXY":"x","http_proxy":"y"}}}`, ts, nil},
		{`{"inner":{"env":{"A":"x","A":"y"}}}`, ts, &Duplicate{Key: "A", First: "A", Path: "inner.env"}},
		{`{"Inner":{"meta":{"k":{"a":1,"A":2}},"Env":{}},"inner":{}}`, ts, &Duplicate{Key: "inner", First: "Inner"}},
		{`{"list":[{"env":{"a":1}},{"env":{"b":1},"ENV":{}}]}`, ts, &Duplicate{Key: "ENV", First: "env", Path: "list[1]"}},
		{`{"any":{"x":1,"X":[{"y":1,"Y":2}]}}`, ts, nil},
		{`{"any":{"x":1,"x":2}}`, ts, &Duplicate{Key: "x", First: "x", Path: "any"}},
		{`{"raw":{"a":1,"a":2,"b":{"c":1,"c":2}}}`, ts, nil},
		{`{"raw":[{"env":{"a":1,"A":2}}]}`, to, nil},
		{`{"raw":[{"env":{},"Env":{}}]}`, to, &Duplicate{Key: "Env", First: "env", Path: "raw[0]"}},
		{`{"any":{"x":1,"X":2}}`, nil, &Duplicate{Key: "X", First: "x", Path: "any"}},
	} {
		got := FindDuplicateIn([]byte(tc.in), tc.typ)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("FindDuplicateIn(%s, %v) = %+v, want %+v", tc.in, tc.typ, got, tc.want)
		}
	}
}
