package builtin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

const sampleJSON = `{
    "name": "demo",
    "version": 1.0,
    "big": 12345678901234567890,
    "a/b": {"m~n": "escaped"},
    "": {"": "empty keys"},
    "items": [
        {"id": 1, "tags": ["x", "y"]},
        {"id": 2}
    ],
    "html": "<a href=\"x\">&</a>",
    "null": null
}
`

func TestJSONRead(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "p.json", sampleJSON)
	e.put(t, "bad.json", "{\n  \"a\": 1,\n  \"b\": ,\n}\n")
	e.put(t, "two.json", "{} {}")
	e.put(t, "bom.json", "\xef\xbb\xbf[1, 2]")
	e.put(t, "deep.json", strings.Repeat("[", 5000)+strings.Repeat("]", 5000))
	tests := []struct {
		name    string
		args    map[string]any
		kind    tool.ErrorKind
		text    string // exact text, or the substrings in want
		want    []string
		typ     string
		value   string // compact structured value
		pointer string // the canonical pointer reported
	}{
		{name: "whole keeps key order", args: map[string]any{"path": "p.json"}, typ: "object",
			want: []string{"{\n  \"name\": \"demo\",\n  \"version\": 1.0,\n  \"big\": 12345678901234567890,\n  \"a/b\""}},
		{name: "member", args: map[string]any{"path": "p.json", "pointer": "/name"}, text: `"demo"`, typ: "string", value: `"demo"`, pointer: "/name"},
		{name: "number as written", args: map[string]any{"path": "p.json", "pointer": "/version"}, text: "1.0", typ: "number", value: "1.0"},
		{name: "big number", args: map[string]any{"path": "p.json", "pointer": "/big"}, text: "12345678901234567890", typ: "number"},
		{name: "escapes ~1 and ~0", args: map[string]any{"path": "p.json", "pointer": "/a~1b/m~0n"}, text: `"escaped"`, typ: "string", pointer: "/a~1b/m~0n"},
		{name: "empty keys", args: map[string]any{"path": "p.json", "pointer": "//"}, text: `"empty keys"`, typ: "string"},
		{name: "array element", args: map[string]any{"path": "p.json", "pointer": "/items/0/tags/1"}, text: `"y"`, typ: "string"},
		{name: "object", args: map[string]any{"path": "p.json", "pointer": "/items/1"}, text: "{\n  \"id\": 2\n}", typ: "object", value: `{"id":2}`},
		{name: "html not escaped", args: map[string]any{"path": "p.json", "pointer": "/html"}, text: `"<a href=\"x\">&</a>"`, typ: "string"},
		{name: "null", args: map[string]any{"path": "p.json", "pointer": "/null"}, text: "null", typ: "null", value: "null"},
		{name: "fragment form", args: map[string]any{"path": "p.json", "pointer": "#/a~1b/m~0n"}, text: `"escaped"`, typ: "string"},
		{name: "bom", args: map[string]any{"path": "bom.json", "pointer": "/1"}, text: "2", typ: "number"},
		{name: "missing key", args: map[string]any{"path": "p.json", "pointer": "/items/0/nope/x"}, kind: tool.KindNotFound,
			want: []string{`the object at "/items/0" has no key "nope"`, `its keys: "id", "tags"`}},
		{name: "index out of range", args: map[string]any{"path": "p.json", "pointer": "/items/2"}, kind: tool.KindNotFound,
			want: []string{`index 2 is out of range, the array at "/items" has 2 elements`}},
		{name: "dash", args: map[string]any{"path": "p.json", "pointer": "/items/-"}, kind: tool.KindNotFound, want: []string{"has 2 elements"}},
		{name: "leading zero", args: map[string]any{"path": "p.json", "pointer": "/items/01"}, kind: tool.KindNotFound, want: []string{`"01" is not an array index`}},
		{name: "into a string", args: map[string]any{"path": "p.json", "pointer": "/name/x"}, kind: tool.KindNotFound,
			want: []string{`the value at "/name" is a string, which has no member "x"`}},
		{name: "no leading slash", args: map[string]any{"path": "p.json", "pointer": "name"}, kind: tool.KindInvalidArgs, want: []string{`start with "/"`}},
		{name: "bad escape", args: map[string]any{"path": "p.json", "pointer": "/a~2b"}, kind: tool.KindInvalidArgs, want: []string{"followed by 0"}},
		{name: "trailing tilde", args: map[string]any{"path": "p.json", "pointer": "/a~"}, kind: tool.KindInvalidArgs},
		{name: "invalid json", args: map[string]any{"path": "bad.json"}, kind: tool.KindFailed, want: []string{"not valid JSON", "line 3, column 8"}},
		{name: "two documents", args: map[string]any{"path": "two.json"}, kind: tool.KindFailed, want: []string{"more data after"}},
		{name: "too deep", args: map[string]any{"path": "deep.json"}, kind: tool.KindFailed, want: []string{"deeper than 1000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.run(t, "json_read", tt.args)
			if res.IsError != (tt.kind != "") || res.ErrorKind != tt.kind {
				t.Fatalf("is_error=%v kind=%q, want %q: %s", res.IsError, res.ErrorKind, tt.kind, res.Text())
			}
			if tt.text != "" && res.Text() != tt.text {
				t.Errorf("text %q, want %q", res.Text(), tt.text)
			}
			fileContains(t, res.Text(), tt.want...)
			if tt.kind != "" {
				return
			}
			out := fileStructured[jsonReadOutput](t, res)
			if out.Type != tt.typ || out.Path != tt.args["path"] {
				t.Errorf("structured %+v", out)
			}
			if tt.value != "" && string(out.Value) != tt.value {
				t.Errorf("value %s, want %s", out.Value, tt.value)
			}
			if tt.pointer != "" && out.Pointer != tt.pointer {
				t.Errorf("pointer %q, want %q", out.Pointer, tt.pointer)
			}
			var v any
			if err := json.Unmarshal([]byte(res.Text()), &v); err != nil {
				t.Errorf("the text is not the value as JSON: %v", err)
			}
		})
	}
}

func TestJSONReadLarge(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	var b strings.Builder
	b.WriteString(`{"list": [`)
	for i := range 20000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"item"`)
	}
	b.WriteString(`], "other": 1}`)
	e.put(t, "large.json", b.String())
	res := e.ok(t, "json_read", map[string]any{"path": "large.json"})
	out := fileStructured[jsonReadOutput](t, res)
	if !out.Omitted || out.Value != nil || len(res.Text()) > outputBudget+1000 {
		t.Errorf("omitted=%v value=%d bytes text=%d bytes", out.Omitted, len(out.Value), len(res.Text()))
	}
	fileContains(t, res.Text(), `an object with 2 keys (its keys: "list", "other")`)
}

func TestJSONWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		file    string // "" for no file
		read    bool   // json_read it first
		args    map[string]any
		kind    tool.ErrorKind
		want    string // the file afterwards (the initial content on error)
		action  string
		created bool
	}{
		{name: "replace member", file: "{\n  \"a\": 1,\n  \"b\": 2\n}\n", read: true, args: map[string]any{"pointer": "/a", "value": "x"},
			want: "{\n  \"a\": \"x\",\n  \"b\": 2\n}\n", action: "replaced"},
		{name: "add member goes last", file: "{\n  \"z\": 1,\n  \"a\": 2\n}\n", read: true, args: map[string]any{"pointer": "/m", "value": map[string]any{"k": []int{1}}},
			want: "{\n  \"z\": 1,\n  \"a\": 2,\n  \"m\": {\n    \"k\": [\n      1\n    ]\n  }\n}\n", action: "added"},
		{name: "append with dash", file: `{"l":[1,2]}`, read: true, args: map[string]any{"pointer": "/l/-", "value": 3},
			want: `{"l":[1,2,3]}`, action: "appended"},
		{name: "append at length", file: `{"l":[1,2]}`, read: true, args: map[string]any{"pointer": "/l/2", "value": 3},
			want: `{"l":[1,2,3]}`, action: "appended"},
		{name: "replace element", file: `{"l":[1,2]}`, read: true, args: map[string]any{"pointer": "/l/0", "value": nil},
			want: `{"l":[null,2]}`, action: "replaced"},
		{name: "index beyond the end", file: `{"l":[1,2]}`, read: true, args: map[string]any{"pointer": "/l/5", "value": 3},
			kind: tool.KindNotFound, want: `{"l":[1,2]}`},
		{name: "tabs and escapes kept", file: "{\n\t\"a~b\": {\"c/d\": 1.50},\n\t\"h\": \"<&>\"\n}", read: true,
			args: map[string]any{"pointer": "/a~0b/c~1d", "value": 2.5}, want: "{\n\t\"a~b\": {\n\t\t\"c/d\": 2.5\n\t},\n\t\"h\": \"<&>\"\n}", action: "replaced"},
		{name: "numbers kept", file: `{"big":12345678901234567890,"f":1.0,"e":1e3}`, read: true, args: map[string]any{"pointer": "/n", "value": 0},
			want: `{"big":12345678901234567890,"f":1.0,"e":1e3,"n":0}`, action: "added"},
		{name: "whole document", file: "not json at all", read: false, args: map[string]any{"pointer": "", "value": []int{1}},
			kind: tool.KindDenied, want: "not json at all"},
		{name: "unread file", file: `{"a":1}`, args: map[string]any{"pointer": "/a", "value": 2}, kind: tool.KindDenied, want: `{"a":1}`},
		{name: "missing parent", file: `{"a":1}`, read: true, args: map[string]any{"pointer": "/x/y", "value": 2},
			kind: tool.KindNotFound, want: `{"a":1}`},
		{name: "create parents", file: `{"a":1}`, read: true, args: map[string]any{"pointer": "/x/y", "value": 2, "create_missing": true},
			want: `{"a":1,"x":{"y":2}}`, action: "added"},
		{name: "set inside a scalar", file: `{"a":1}`, read: true, args: map[string]any{"pointer": "/a/b", "value": 2, "create_missing": true},
			kind: tool.KindNotFound, want: `{"a":1}`},
		{name: "new file needs create_missing", args: map[string]any{"pointer": "/a", "value": 1}, kind: tool.KindNotFound, want: "<missing>"},
		{name: "new file", args: map[string]any{"pointer": "/a/b", "value": true, "create_missing": true},
			want: "{\n  \"a\": {\n    \"b\": true\n  }\n}\n", action: "added", created: true},
		{name: "new file whole", args: map[string]any{"pointer": "", "value": []string{"x"}}, want: "[\n  \"x\"\n]\n", action: "replaced", created: true},
		{name: "bad pointer", file: `{}`, read: true, args: map[string]any{"pointer": "a", "value": 1}, kind: tool.KindInvalidArgs, want: `{}`},
		{name: "not json", file: `{"a":`, read: false, args: map[string]any{"pointer": "/a", "value": 1}, kind: tool.KindDenied, want: `{"a":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newFileEnv(t)
			if tt.file != "" {
				e.put(t, "c.json", tt.file)
			}
			if tt.read {
				e.ok(t, "json_read", map[string]any{"path": "c.json"})
			}
			args := map[string]any{"path": "c.json"}
			for k, v := range tt.args {
				args[k] = v
			}
			res := e.run(t, "json_write", args)
			if res.IsError != (tt.kind != "") || res.ErrorKind != tt.kind {
				t.Fatalf("is_error=%v kind=%q, want %q: %s", res.IsError, res.ErrorKind, tt.kind, res.Text())
			}
			if got := e.disk(t, "c.json"); got != tt.want {
				t.Errorf("c.json holds %q, want %q", got, tt.want)
			}
			if tt.kind == "" {
				out := fileStructured[jsonWriteOutput](t, res)
				if out.Action != tt.action || out.CreatedFile != tt.created || out.Path != "c.json" {
					t.Errorf("structured %+v", out)
				}
			}
		})
	}
}

func TestJSONWriteSequence(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "broken.json", `{"a": 1,}`)
	// read_file counts as a read; a broken document can be replaced whole but not set into.
	e.ok(t, "read_file", map[string]any{"path": "broken.json"})
	e.fail(t, "json_write", map[string]any{"path": "broken.json", "pointer": "/a", "value": 2}, tool.KindFailed, "not valid JSON", "trailing commas")
	e.ok(t, "json_write", map[string]any{"path": "broken.json", "pointer": "", "value": map[string]any{"a": 2}})
	// Further writes need no new read; a change on disk does.
	e.ok(t, "json_write", map[string]any{"path": "broken.json", "pointer": "/b", "value": 3})
	if got := e.disk(t, "broken.json"); got != `{"a":2,"b":3}` {
		t.Errorf("broken.json holds %q", got)
	}
	e.put(t, "broken.json", `{"a":2,"b":4}`)
	e.fail(t, "json_write", map[string]any{"path": "broken.json", "pointer": "/c", "value": 5}, tool.KindDenied, "changed on disk")
	// A json_write counts as a read for edit_file too.
	e.ok(t, "json_read", map[string]any{"path": "broken.json", "pointer": "/b"})
	e.ok(t, "json_write", map[string]any{"path": "broken.json", "pointer": "/c", "value": 5})
	e.ok(t, "edit_file", map[string]any{"path": "broken.json", "old_string": `"c":5`, "new_string": `"c":6`})
	if got := e.disk(t, "broken.json"); got != `{"a":2,"b":4,"c":6}` {
		t.Errorf("broken.json holds %q", got)
	}
}
