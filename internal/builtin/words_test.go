package builtin

import (
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestCountsAgreeWithOne: results that count things say "1 file", "1 line", "1 key",
// not "1 files" (a model quoting them back looks careless, and a person reading a
// log trips on it); more than one keeps the plural.
func TestCountsAgreeWithOne(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "one.txt", "only\n")
	e.put(t, "d/only.txt", "x\n")
	e.put(t, "one.json", `{"a":[1],"big":"`+strings.Repeat("x", outputBudget)+`"}`)
	e.put(t, "single.json", `{"big":"`+strings.Repeat("x", outputBudget)+`"}`)
	e.put(t, "long.txt", strings.Repeat("y", maxLineChars+10)+"\n")

	check := func(what, text string, want, notWant string) {
		t.Helper()
		if !strings.Contains(text, want) || (notWant != "" && strings.Contains(text, notWant)) {
			t.Errorf("%s: %q, want %q (and not %q)", what, text, want, notWant)
		}
	}
	res := e.run(t, "read_file", map[string]any{"path": "one.txt", "offset": 5})
	check("read_file past the end of a 1-line file", res.Text(), "which has 1 line", "1 lines")
	res = e.ok(t, "read_file", map[string]any{"path": "long.txt"})
	check("read_file of one long line", res.Text(), "[1 line longer than", "1 lines")
	e.ok(t, "read_file", map[string]any{"path": "one.txt"})
	res = e.ok(t, "write_file", map[string]any{"path": "one.txt", "content": "again\n"})
	check("write_file of 1 line", res.Text(), "(1 line,", "1 lines")
	res = e.ok(t, "multi_edit", map[string]any{"path": "one.txt", "edits": []map[string]any{{"old_string": "again", "new_string": "once"}}})
	check("multi_edit of 1 edit", res.Text(), "1 of 1 edit applied", "1 edits")
	res = e.ok(t, "list_dir", map[string]any{"path": "d"})
	check("list_dir of a folder with 1 entry", res.Text(), "(1 entry,", "1 entries")
	res = e.ok(t, "list_dir", map[string]any{"path": "."})
	check("list_dir of several entries", res.Text(), " entries,", "")
	res = e.run(t, "json_read", map[string]any{"path": "one.json", "pointer": "/a/3"})
	check("json_read past the end of a 1-element array", res.Text(), "has 1 element", "1 elements")
	res = e.ok(t, "json_read", map[string]any{"path": "single.json"})
	check("json_read of a large object with 1 key", res.Text(), "an object with 1 key", "1 keys")
}

// TestEditMatchLinesDistinct: an old_string that occurs many times on one line (a
// minified file) listed "at lines 1, 1, 1, 1, …"; the lines are listed once each,
// with how many times when more than once.
func TestEditMatchLinesDistinct(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "min.js", strings.Repeat("a;", 2000)+"\nb;\na;a;\n")
	e.ok(t, "read_file", map[string]any{"path": "min.js"})
	res := e.fail(t, "edit_file", map[string]any{"path": "min.js", "old_string": "a;", "new_string": "c;"}, tool.KindInvalidArgs)
	text := res.Text()
	if !strings.Contains(text, "matches 2002 times (at lines 1 (2000 times), 3 (2 times))") {
		t.Errorf("many matches on one line: %q", text)
	}
	res = e.ok(t, "edit_file", map[string]any{"path": "min.js", "old_string": "a;", "new_string": "c;", "replace_all": true})
	if text := res.Text(); !strings.Contains(text, "replaced 2002 occurrences (at lines 1 (2000 times), 3 (2 times) of the old text)") {
		t.Errorf("replace_all: %q", text)
	}
	// Matches on many lines: the first ten lines, then how many more lines.
	e.put(t, "many.txt", strings.Repeat("x\n", 30))
	e.ok(t, "read_file", map[string]any{"path": "many.txt"})
	res = e.fail(t, "edit_file", map[string]any{"path": "many.txt", "old_string": "x", "new_string": "y"}, tool.KindInvalidArgs)
	if text := res.Text(); !strings.Contains(text, "matches 30 times (at lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 20 more lines)") {
		t.Errorf("matches on many lines: %q", text)
	}
}

// TestSkillFolderOfOneFile: "holds 1 files".
func TestSkillFolderOfOneFile(t *testing.T) {
	t.Parallel()
	open := referenceSkill(t)
	if res := open("ooxml/schemas/deep"); res.IsError || !strings.Contains(res.Text(), "holds 1 file ") {
		t.Errorf("folder of one file: error=%v %q", res.IsError, res.Text())
	}
	if res := open("scripts"); res.IsError || !strings.Contains(res.Text(), "holds 2 files ") {
		t.Errorf("folder of two files: error=%v %q", res.IsError, res.Text())
	}
}
