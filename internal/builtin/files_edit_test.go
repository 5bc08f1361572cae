package builtin

import (
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

func TestEditFile(t *testing.T) {
	t.Parallel()
	const code = "func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n"
	tests := []struct {
		name    string
		file    string // initial content of f.go
		args    map[string]any
		kind    tool.ErrorKind
		want    []string // in the result text
		content string   // f.go afterwards (the initial content when the edit fails)
	}{
		{name: "unique", file: code, args: map[string]any{"old_string": "func b() {\n\treturn 1", "new_string": "func b() {\n\treturn 2"},
			want:    []string{"replaced 1 occurrence at line 5", "now reads:\n     2\t\treturn 1\n     3\t}\n     4\t\n     5\tfunc b() {\n     6\t\treturn 2\n     7\t}"},
			content: "func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 2\n}\n"},
		{name: "twice", file: code, args: map[string]any{"old_string": "return 1", "new_string": "return 2"},
			kind: tool.KindInvalidArgs, want: []string{"matches 2 times (at lines 2, 6)", "replace_all", "Nothing was written"}},
		{name: "replace all", file: code, args: map[string]any{"old_string": "return 1", "new_string": "return 2", "replace_all": true},
			want: []string{"replaced 2 occurrences (at lines 2, 6"}, content: strings.ReplaceAll(code, "return 1", "return 2")},
		{name: "delete", file: "keep\ndrop me\nkeep\n", args: map[string]any{"old_string": "drop me\n", "new_string": ""}, content: "keep\nkeep\n"},
		{name: "whitespace differs", file: code, args: map[string]any{"old_string": "    return 1\n}\n\nfunc b", "new_string": "x"},
			kind: tool.KindInvalidArgs, want: []string{"not found", "Line 2 matches its first line apart from whitespace"}},
		{name: "closest line", file: code, args: map[string]any{"old_string": "func bb() {", "new_string": "x"},
			kind: tool.KindInvalidArgs, want: []string{"not found", "most similar line is"}},
		{name: "line numbers copied", file: code, args: map[string]any{"old_string": "     5\tfunc b() {\n     6\t\treturn 1", "new_string": "     5\tfunc b() {\n     6\t\treturn 2"},
			kind: tool.KindInvalidArgs, want: []string{"not found", `line-number prefix ("     5\t")`, "leave the prefixes out", "Without them it occurs once, at line 5"}},
		{name: "line numbers copied, text differs", file: code, args: map[string]any{"old_string": "     6\t\treturn 9\n     7\t}", "new_string": "x"},
			kind: tool.KindInvalidArgs, want: []string{"line-number prefix", "most similar line is 2"}},
		{name: "nothing alike", file: code, args: map[string]any{"old_string": "zzzzqqqq", "new_string": "x"},
			kind: tool.KindInvalidArgs, want: []string{"No line resembles"}},
		{name: "identical", file: code, args: map[string]any{"old_string": "func a", "new_string": "func a"},
			kind: tool.KindInvalidArgs, want: []string{"identical"}},
		{name: "empty old_string", file: code, args: map[string]any{"old_string": "", "new_string": "x"},
			kind: tool.KindInvalidArgs, want: []string{"write_file"}},
		{name: "crlf file", file: "one\r\ntwo\r\nthree\r\n", args: map[string]any{"old_string": "one\ntwo", "new_string": "1\n2"},
			content: "1\r\n2\r\nthree\r\n"},
		{name: "not utf-8", file: "plain ascii line\ncaf\xe9 au lait, latin-1\n", args: map[string]any{"old_string": "caf", "new_string": "tea"},
			kind: tool.KindFailed, want: []string{"not valid UTF-8", "line 2"}},
		{name: "unicode", file: "naïve café\n", args: map[string]any{"old_string": "café", "new_string": "コーヒー"}, content: "naïve コーヒー\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newFileEnv(t)
			e.put(t, "f.go", tt.file)
			e.ok(t, "read_file", map[string]any{"path": "f.go"})
			args := map[string]any{"path": "f.go"}
			for k, v := range tt.args {
				args[k] = v
			}
			res := e.run(t, "edit_file", args)
			if res.IsError != (tt.kind != "") || res.ErrorKind != tt.kind {
				t.Fatalf("is_error=%v kind=%q, want %q: %s", res.IsError, res.ErrorKind, tt.kind, res.Text())
			}
			fileContains(t, res.Text(), tt.want...)
			if strings.HasSuffix(res.Text(), "\t") {
				t.Errorf("the snippet ends with a line past the end of the file: %q", res.Text())
			}
			want := tt.content
			if tt.kind != "" {
				want = tt.file
			}
			if got := e.disk(t, "f.go"); got != want {
				t.Errorf("f.go holds %q, want %q", got, want)
			}
		})
	}
}

// TestEditFileNumberedText: text that starts with a number and a tab, as a TSV row
// does, is not taken for read_file's line-number prefix when it is not found.
func TestEditFileNumberedText(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "t.tsv", "1\tapple\n2\tbanana\n")
	e.ok(t, "read_file", map[string]any{"path": "t.tsv"})
	// Ids of six digits or more, one after the other, read like read_file's numbers of
	// lines 100000 and on, which a file this short does not have.
	e.put(t, "ids.tsv", "100000\tapple\n100001\tbanana\n")
	e.ok(t, "read_file", map[string]any{"path": "ids.tsv"})
	res := e.run(t, "edit_file", map[string]any{"path": "ids.tsv", "old_string": "100000\tapple\n100001\tbananas", "new_string": "x"})
	if !res.IsError || strings.Contains(res.Text(), "line-number prefix (") {
		t.Errorf("ids.tsv: is_error=%v %q, want not found without a word of line-number prefixes", res.IsError, res.Text())
	}
	for _, old := range []string{"1\tapples", "     1\tapple\n     3\tbanana"} {
		res := e.run(t, "edit_file", map[string]any{"path": "t.tsv", "old_string": old, "new_string": "x"})
		if !res.IsError || strings.Contains(res.Text(), "line-number prefix (") {
			t.Errorf("old_string %q: is_error=%v %q, want not found without a word of line-number prefixes", old, res.IsError, res.Text())
		}
	}
}

func TestEditFileSequence(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.fail(t, "edit_file", map[string]any{"path": "none.txt", "old_string": "a", "new_string": "b"}, tool.KindNotFound, "write_file")
	e.put(t, "d/x.txt", "a")
	e.fail(t, "edit_file", map[string]any{"path": "d", "old_string": "a", "new_string": "b"}, tool.KindInvalidArgs, "directory")
	e.put(t, "s.txt", "v1\n")
	e.ok(t, "read_file", map[string]any{"path": "s.txt"})
	// After an edit the guard is up to date: further edits need no new read.
	for _, next := range []string{"v2", "v3", "v4"} {
		prev := strings.TrimSpace(e.disk(t, "s.txt"))
		res := e.ok(t, "edit_file", map[string]any{"path": "s.txt", "old_string": prev, "new_string": next})
		if got := fileStructured[editOutput](t, res); got.Replacements != 1 || len(got.Lines) != 1 || got.Lines[0] != 1 {
			t.Errorf("structured %+v", got)
		}
	}
	if got := e.disk(t, "s.txt"); got != "v4\n" {
		t.Errorf("s.txt holds %q", got)
	}
}

func TestMultiEdit(t *testing.T) {
	t.Parallel()
	const start = "alpha\nbeta\ngamma\n"
	edits := []map[string]any{
		{"old_string": "alpha", "new_string": "ALPHA"},
		{"old_string": "missing", "new_string": "x"},
		{"old_string": "gamma", "new_string": "GAMMA"},
	}
	tests := []struct {
		name     string
		mode     string
		edits    []map[string]any
		isError  bool
		content  string
		statuses []string
	}{
		{"strict fails whole", "strict", edits, true, start, []string{editRolledBack, editFailed, editRolledBack}},
		{"partial (default) stops", "", edits, false, "ALPHA\nbeta\ngamma\n", []string{editApplied, editFailed, editNotAttempted}},
		{"best effort skips", "best_effort", edits, false, "ALPHA\nbeta\nGAMMA\n", []string{editApplied, editFailed, editApplied}},
		{"strict succeeds", "strict", []map[string]any{edits[0], edits[2]}, false, "ALPHA\nbeta\nGAMMA\n", []string{editApplied, editApplied}},
		{"chained edits", "strict", []map[string]any{
			{"old_string": "beta", "new_string": "delta"},
			{"old_string": "delta\ngamma", "new_string": "epsilon"},
		}, false, "alpha\nepsilon\n", []string{editApplied, editApplied}},
		{"first fails in partial", "partial", []map[string]any{edits[1], edits[0]}, true, start, []string{editFailed, editNotAttempted}},
		{"all fail in best effort", "best_effort", []map[string]any{edits[1], {"old_string": "a", "new_string": "b"}}, true, start,
			[]string{editFailed, editFailed}},
		{"cancelling edits", "strict", []map[string]any{
			{"old_string": "beta", "new_string": "BETA"}, {"old_string": "BETA", "new_string": "beta"},
		}, false, start, []string{editApplied, editApplied}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newFileEnv(t)
			e.put(t, "m.txt", start)
			e.ok(t, "read_file", map[string]any{"path": "m.txt"})
			args := map[string]any{"path": "m.txt", "edits": tt.edits}
			if tt.mode != "" {
				args["mode"] = tt.mode
			}
			res := e.run(t, "multi_edit", args)
			if res.IsError != tt.isError || (tt.isError && res.ErrorKind != tool.KindInvalidArgs) {
				t.Fatalf("is_error=%v kind=%q: %s", res.IsError, res.ErrorKind, res.Text())
			}
			if got := e.disk(t, "m.txt"); got != tt.content {
				t.Errorf("m.txt holds %q, want %q", got, tt.content)
			}
			out := fileStructured[multiEditOutput](t, res)
			if len(out.Edits) != len(tt.statuses) {
				t.Fatalf("edits %+v", out.Edits)
			}
			failed := 0
			for i, r := range out.Edits {
				if r.Index != i || r.Status != tt.statuses[i] {
					t.Errorf("edit %d: %+v, want status %s", i, r, tt.statuses[i])
				}
				if r.Status == editFailed {
					failed++
					if !strings.Contains(r.Reason, "not found") && !strings.Contains(r.Reason, "matches") {
						t.Errorf("edit %d: reason %q", i, r.Reason)
					}
				}
			}
			if out.Failed != failed || out.Written != (tt.content != start) {
				t.Errorf("out %+v", out)
			}
			fileContains(t, res.Text(), "edits[0]: ")
		})
	}
}

func TestMultiEditGuard(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "g.txt", "a b c\n")
	edits := []map[string]any{{"old_string": "a", "new_string": "A"}}
	e.fail(t, "multi_edit", map[string]any{"path": "g.txt", "edits": edits}, tool.KindDenied, "has not been read")
	e.ok(t, "read_file", map[string]any{"path": "g.txt", "offset": 1, "limit": 1})
	e.ok(t, "multi_edit", map[string]any{"path": "g.txt", "edits": edits})
	e.ok(t, "multi_edit", map[string]any{"path": "g.txt", "edits": []map[string]any{{"old_string": "b", "new_string": "B"}}})
	if got := e.disk(t, "g.txt"); got != "A B c\n" {
		t.Errorf("g.txt holds %q", got)
	}
	e.fail(t, "multi_edit", map[string]any{"path": "g.txt", "edits": edits, "mode": "all"}, tool.KindInvalidArgs, "mode")
}

// TestEditResultBounded: an edit whose result would pass the size the file tools
// handle is refused before the text is built. replace_all of one character, or a
// multi_edit whose every edit doubles the text, would otherwise grow it without bound
// (a few dozen doublings exhaust the daemon's memory).
func TestEditResultBounded(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	big := strings.Repeat("a", 1<<20)
	e.put(t, "big.txt", big)
	e.ok(t, "read_file", map[string]any{"path": "big.txt"})
	e.fail(t, "edit_file", map[string]any{"path": "big.txt", "old_string": "a", "new_string": strings.Repeat("b", 16), "replace_all": true},
		tool.KindInvalidArgs, "larger than", "Nothing was written")
	if e.disk(t, "big.txt") != big {
		t.Errorf("big.txt changed")
	}

	e.put(t, "seed.txt", "a")
	e.ok(t, "read_file", map[string]any{"path": "seed.txt"})
	edits := make([]map[string]any, 40)
	for i := range edits {
		edits[i] = map[string]any{"old_string": "a", "new_string": "aa", "replace_all": true}
	}
	res := e.fail(t, "multi_edit", map[string]any{"path": "seed.txt", "edits": edits, "mode": "strict"}, tool.KindInvalidArgs, "larger than")
	fileContains(t, res.Text(), "edits[22]: rolled back", "edits[23]: failed")
	if got := e.disk(t, "seed.txt"); got != "a" {
		t.Errorf("seed.txt holds %d bytes", len(got))
	}
}
