package tool

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestDecodeArgsIntegralNumbers(t *testing.T) {
	t.Parallel()
	type args struct {
		Offset int64            `json:"offset"`
		Limit  int              `json:"limit"`
		Ratio  float64          `json:"ratio"`
		Lines  []int            `json:"lines"`
		Counts map[string]uint8 `json:"counts"`
		Name   string           `json:"name"`
	}
	var a args
	err := DecodeArgs(json.RawMessage(`{"offset":2.0,"limit":1e3,"ratio":0.5,"lines":[1.0,-2.00],"counts":{"x":2.5e1},"name":"2.0"}`), &a)
	if err != nil {
		t.Fatal(err)
	}
	if a.Offset != 2 || a.Limit != 1000 || a.Ratio != 0.5 || len(a.Lines) != 2 || a.Lines[1] != -2 || a.Counts["x"] != 25 || a.Name != "2.0" {
		t.Errorf("decoded %+v", a)
	}
	for _, bad := range []string{
		`{"offset":2.5}`,             // not an integer
		`{"offset":1e300}`,           // beyond what is exact
		`{"offset":"2"}`,             // a string stays a string
		`{"offset":2.0,"unknown":1}`, // strict
		`{"counts":{"x":300.0}}`,     // out of range for uint8
		`{"offset":1}{"offset":2}`,   // two values
	} {
		var b args
		if err := DecodeArgs(json.RawMessage(bad), &b); err == nil {
			t.Errorf("DecodeArgs(%s) = nil error, decoded %+v", bad, b)
		}
	}
	var loose args
	if err := UnmarshalArgs(json.RawMessage(`{"offset":3.0,"unknown":1}`), &loose); err != nil || loose.Offset != 3 {
		t.Errorf("UnmarshalArgs: %v %+v", err, loose)
	}
	var empty args
	if err := DecodeArgs(nil, &empty); err != nil {
		t.Errorf("empty arguments: %v", err)
	}
	if err := DecodeArgs(json.RawMessage(`{"limit":1.5}`), &empty); err == nil || !strings.Contains(err.Error(), "1.5") {
		t.Errorf("error for 1.5: %v", err)
	}
}

// BenchmarkUnmarshalArgs: what a FuncTool does with a call's arguments before it runs.
func BenchmarkUnmarshalArgs(b *testing.B) {
	var v struct {
		Text string `json:"text"`
	}
	for b.Loop() {
		if err := UnmarshalArgs(json.RawMessage(`{"text":"ok"}`), &v); err != nil || v.Text != "ok" {
			b.Fatal(err, v)
		}
	}
}

// TestUnmarshalArgsAfterTheValue: what follows the arguments' value is answered as
// the json.Decoder always answered it, whichever way the value is decoded.
func TestUnmarshalArgsAfterTheValue(t *testing.T) {
	t.Parallel()
	type args struct {
		Text string `json:"text"`
	}
	for _, c := range []struct{ in, err, text string }{
		{in: `{"text":"a"}`, text: "a"},
		{in: " {\"text\":\"a\"}\n", text: "a"},
		{in: `{"text":"a"} {"text":"b"}`, err: "arguments hold more than one JSON value", text: "a"},
		{in: `{"text":"a"}x`, err: "arguments hold more than one JSON value", text: "a"},
		{in: `{"text":"a"}}`, text: "a"}, // the Decoder stops at the value's end
		{in: `{"text":1}`, err: "json: cannot unmarshal number into Go struct field args.text of type string"},
		{in: `{"text":`, err: "unexpected EOF"},
		{in: `{"text" "a"}`, err: "invalid character '\"' after object key"},
	} {
		var v args
		err := UnmarshalArgs(json.RawMessage(c.in), &v)
		if got := fmt.Sprint(err); (c.err == "" && err != nil) || (c.err != "" && got != c.err) || v.Text != c.text {
			t.Errorf("%q: %v, %+v; want error %q, text %q", c.in, err, v, c.err, c.text)
		}
	}
}
