package jsontext

import (
	"encoding/json"
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
