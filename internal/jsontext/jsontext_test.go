package jsontext

import (
	"encoding/json"
	"math"
	"testing"
)

func TestUnescapeHTML(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"command":"a \u0026\u0026 b \u003e log \u003C in"}`, `{"command":"a && b > log < in"}`},
		{`"\\u0026"`, `"\\u0026"`},                       // an escaped backslash, then the text u0026
		{`"\\\u0026"`, `"\\&"`},                          // an escaped backslash, then an escaped &
		{`"\u00e9 \n \" \u002"`, `"\u00e9 \n \" \u002"`}, // other escapes, a short one
		{`"\`, `"\`},
	} {
		if got := string(UnescapeHTML([]byte(tc.in))); got != tc.want {
			t.Errorf("UnescapeHTML(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestFromYAML(t *testing.T) {
	t.Parallel()
	in := map[string]any{"codes": map[any]any{200: "ok", "x": []any{map[any]any{true: 1}}}, "n": math.Inf(1), "nan": math.NaN(), "s": "text"}
	b, err := json.Marshal(FromYAML(in))
	if err != nil {
		t.Fatalf("FromYAML's result cannot be written as JSON: %v", err)
	}
	if want := `{"codes":{"200":"ok","x":[{"true":1}]},"n":"+Inf","nan":"NaN","s":"text"}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}
