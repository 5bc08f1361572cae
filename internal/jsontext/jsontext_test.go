package jsontext

import "testing"

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
