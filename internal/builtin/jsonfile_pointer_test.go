package builtin

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParsePointer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		want  []string // nil with err
		err   string
		canon string // String() of the result; "" means in
	}{
		{in: "", want: []string{}},
		{in: "/", want: []string{""}},
		{in: "//", want: []string{"", ""}},
		{in: "/a/b", want: []string{"a", "b"}},
		{in: "/a~1b", want: []string{"a/b"}},
		{in: "/m~0n", want: []string{"m~n"}},
		// ~01 is "~1" (not "/"): ~1 is replaced first, then ~0.
		{in: "/~01", want: []string{"~1"}},
		{in: "/~10", want: []string{"/0"}},
		{in: "/-", want: []string{"-"}},
		{in: "/ü/ with space", want: []string{"ü", " with space"}},
		{in: "#/a%20b/c~1d", want: []string{"a b", "c/d"}, canon: "/a b/c~1d"},
		{in: "#", want: []string{}, canon: ""},
		{in: "a", err: `start with "/"`},
		{in: "/a~", err: "followed by 0"},
		{in: "/~2", err: "followed by 0"},
		{in: "/ok/~x", err: "token 2"},
		{in: "#/%zz", err: "percent-encoding"},
		{in: "#/%A6", err: "not valid UTF-8"},
		{in: "/\xa6", err: "not valid UTF-8"},
	}
	for _, tt := range tests {
		p, err := parsePointer(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parsePointer(%q) error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal([]string(p), tt.want) {
			t.Errorf("parsePointer(%q) = %q, %v; want %q", tt.in, p, err, tt.want)
			continue
		}
		canon := tt.in
		if tt.canon != "" || strings.HasPrefix(tt.in, "#") {
			canon = tt.canon
		}
		if p.String() != canon {
			t.Errorf("parsePointer(%q).String() = %q, want %q", tt.in, p.String(), canon)
		}
	}
}

const pointerDoc = `{"a":[1,{"b":null}],"":{"":0},"m~n":{"a/b":true},"s":"str","e":[]}`

func TestPointerGetSet(t *testing.T) {
	t.Parallel()
	get := []struct{ ptr, want, err string }{
		{ptr: "", want: pointerDoc},
		{ptr: "/a/1/b", want: "null"},
		{ptr: "/m~0n/a~1b", want: "true"},
		{ptr: "//", want: "0"},
		{ptr: "/a/2", err: "out of range"},
		{ptr: "/a/-", err: "out of range"},
		{ptr: "/a/+1", err: "not an array index"},
		{ptr: "/a/1e0", err: "not an array index"},
		{ptr: "/a/99999999999999999999999", err: "out of range"},
		{ptr: "/s/0", err: "is a string"},
		{ptr: "/x", err: `has no key "x"`},
		{ptr: "/e/0", err: "has 0 elements"},
	}
	for _, tt := range get {
		doc := mustParse(t, pointerDoc)
		p, err := parsePointer(tt.ptr)
		if err != nil {
			t.Fatal(err)
		}
		v, err := pointerGet(doc, p)
		if tt.err != "" {
			var pe *pointerError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("get %q: error %v, want %q", tt.ptr, err, tt.err)
			}
			continue
		}
		if got := mustMarshal(t, v); err != nil || got != tt.want {
			t.Errorf("get %q = %s, %v; want %s", tt.ptr, got, err, tt.want)
		}
	}
	set := []struct {
		ptr    string
		create bool
		want   string // the document after, or the error
		action string
	}{
		{ptr: "", want: `"X"`, action: "replaced"},
		{ptr: "/a/0", want: `{"a":["X",{"b":null}],"":{"":0},"m~n":{"a/b":true},"s":"str","e":[]}`, action: "replaced"},
		{ptr: "/e/-", want: `{"a":[1,{"b":null}],"":{"":0},"m~n":{"a/b":true},"s":"str","e":["X"]}`, action: "appended"},
		{ptr: "/e/0", want: `{"a":[1,{"b":null}],"":{"":0},"m~n":{"a/b":true},"s":"str","e":["X"]}`, action: "appended"},
		{ptr: "/m~0n/c~1d", want: `{"a":[1,{"b":null}],"":{"":0},"m~n":{"a/b":true,"c/d":"X"},"s":"str","e":[]}`, action: "added"},
		{ptr: "/n/o/p", create: true, want: `{"a":[1,{"b":null}],"":{"":0},"m~n":{"a/b":true},"s":"str","e":[],"n":{"o":{"p":"X"}}}`, action: "added"},
		{ptr: "/n/o/p", want: `error: has no key "n"`},
		{ptr: "/e/1", want: `error: use "/e/-" to append`},
		{ptr: "/e/-/x", create: true, want: "error: out of range"},
		{ptr: "/s/x", create: true, want: "error: is a string"},
		{ptr: "/a/01", want: "error: not an array index"},
	}
	for _, tt := range set {
		p, err := parsePointer(tt.ptr)
		if err != nil {
			t.Fatal(err)
		}
		doc, action, err := pointerSet(mustParse(t, pointerDoc), p, "X", tt.create)
		if wantErr, ok := strings.CutPrefix(tt.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("set %q: error %v, want %q", tt.ptr, err, wantErr)
			}
			continue
		}
		if err != nil || action != tt.action || mustMarshal(t, doc) != tt.want {
			t.Errorf("set %q = %s, %s, %v; want %s, %s", tt.ptr, mustMarshal(t, doc), action, err, tt.want, tt.action)
		}
	}
}

func TestJSONStyle(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want jsonStyle
	}{
		{`{"a":1}`, jsonStyle{}},
		{"{\"a\":1}\n", jsonStyle{newline: true}},
		{"{\n    \"a\": 1\n}\n", jsonStyle{indent: "    ", newline: true}},
		{"{\n\t\"a\": 1\n}", jsonStyle{indent: "\t"}},
		{"\xef\xbb\xbf[\n 1\n]", jsonStyle{indent: " ", bom: true}},
		{"[\n\n]", jsonStyle{indent: "  "}},
	} {
		if got := detectJSONStyle([]byte(tt.in)); got != tt.want {
			t.Errorf("detectJSONStyle(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func mustParse(t testing.TB, s string) any {
	t.Helper()
	v, err := parseJSONDoc([]byte(s))
	if err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	return v
}

func mustMarshal(t testing.TB, v any) string {
	t.Helper()
	b, err := marshalNoEscape(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}

// FuzzJSONPointer checks that any pointer that parses prints back to a pointer with
// the same tokens, and that reading and setting it in a document never panics, keeps
// the document valid JSON and makes a set value readable at the same pointer.
func FuzzJSONPointer(f *testing.F) {
	for _, s := range []string{"", "/", "//", "/a", "/a/0", "/a/1/b", "/a/-", "/m~0n/a~1b", "/~", "/~2", "/01", "#/a%20b", "#%", "/e/-/x", "/s/0", "/n/o/p", "/\xa6", "#/%A6"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, create bool) {
		p, err := parsePointer(s)
		if err != nil {
			return
		}
		q, err := parsePointer(p.String())
		if err != nil || !slices.Equal(p, q) {
			t.Fatalf("%q: String() %q parses to %q, %v", s, p.String(), q, err)
		}
		if !strings.HasPrefix(s, "#") && p.String() != s {
			t.Fatalf("%q: String() is %q", s, p.String())
		}
		_, _ = pointerGet(mustParse(t, pointerDoc), p)
		doc, _, err := pointerSet(mustParse(t, pointerDoc), p, "X", create)
		if err != nil {
			var pe *pointerError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: set failed without a pointerError: %v", s, err)
			}
			return
		}
		text := mustMarshal(t, doc)
		again := mustParse(t, text)
		if mustMarshal(t, again) != text {
			t.Fatalf("%q: the document does not survive a round trip: %s", s, text)
		}
		if slices.Contains(p, "-") {
			return // "-" appended; it names no element to read back
		}
		v, err := pointerGet(again, p)
		if err != nil || v != "X" {
			t.Fatalf("%q: after set, get = %v, %v", s, v, err)
		}
	})
}
