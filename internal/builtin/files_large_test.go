package builtin

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// catalogOf is a session's tool list of the given names.
type catalogOf []string

func (c catalogOf) Lookup(name string) (tool.Spec, bool) {
	return tool.Spec{Name: name}, slices.Contains(c, name)
}
func (c catalogOf) Names() []string { return c }

// TestTooLargeFileSaysWhatToDo: edit_file, multi_edit and the json tools refused a
// file over 10 MiB with only its size, so the model did not know how else to get at
// it. The refusal names the tools that can (grep with line numbers, read_file with
// offset and limit, execute_command with sed or jq), and only those the session has.
func TestTooLargeFileSaysWhatToDo(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	big := e.put(t, "big.txt", "x\n")
	if err := os.Truncate(big, maxTextFile+1); err != nil {
		t.Fatal(err)
	}
	bigJSON := e.put(t, "big.json", "{}")
	if err := os.Truncate(bigJSON, maxTextFile+1); err != nil {
		t.Fatal(err)
	}
	edit := map[string]any{"path": "big.txt", "old_string": "x", "new_string": "y"}
	cases := []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"edit_file", edit, []string{"larger than the 10.0 MiB", "grep", "read_file with offset and limit", "execute_command", "sed -i"}},
		{"multi_edit", map[string]any{"path": "big.txt", "edits": []any{map[string]any{"old_string": "x", "new_string": "y"}}},
			[]string{"larger than the 10.0 MiB", "read_file with offset and limit", "sed -i"}},
		{"json_read", map[string]any{"path": "big.json", "pointer": "/a"}, []string{"larger than the 10.0 MiB", "read_file with offset and limit", "jq"}},
		{"json_write", map[string]any{"path": "big.json", "pointer": "/a", "value": 1}, []string{"larger than the 10.0 MiB", "jq"}},
	}
	for _, c := range cases {
		e.fail(t, c.tool, c.args, tool.KindFailed, c.want...)
	}

	// A session without execute_command is not sent to it.
	sess := e.newSession("s2")
	sess.Tools = catalogOf{"edit_file", "grep", "read_file"}
	res := e.runIn(t, sess, "edit_file", edit)
	if text := res.Text(); !res.IsError || !strings.Contains(text, "read_file with offset and limit") || strings.Contains(text, "execute_command") {
		t.Errorf("without execute_command: %s", text)
	}
}

// TestOverText: a size just over a limit does not read as the limit itself.
func TestOverText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n, limit int64
		want     string
	}{
		{10<<20 + 1, 10 << 20, "10.0 MiB (10485761 bytes, 1 over)"},
		{12 << 20, 10 << 20, "12.0 MiB"},
		{2048, 1024, "2.0 KiB"},
	} {
		if got := overText(tc.n, tc.limit); got != tc.want {
			t.Errorf("overText(%d, %d) = %q, want %q", tc.n, tc.limit, got, tc.want)
		}
	}
}

// TestDirectoryAdviceNamesOnlyTheSessionsTools: read_file on a directory told a model
// without list_dir or tree to use them, and its next call was refused as not
// available. The advice names only tools the session has.
func TestDirectoryAdviceNamesOnlyTheSessionsTools(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	if err := os.Mkdir(e.dir+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tools        catalogOf
		want, absent []string
	}{
		{nil, []string{"list_dir or tree"}, nil},
		{catalogOf{"read_file", "list_dir"}, []string{"list_dir"}, []string{"tree"}},
		{catalogOf{"read_file", "execute_command"}, []string{"is a directory, not a file"}, []string{"list_dir", "tree"}},
	} {
		sess := e.newSession("s-" + strings.Join(tc.tools, "-"))
		if tc.tools != nil {
			sess.Tools = tc.tools
		}
		res := e.runIn(t, sess, "read_file", map[string]any{"path": "sub"})
		text := res.Text()
		if !res.IsError {
			t.Errorf("%v: read_file of a directory succeeded: %s", tc.tools, text)
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%v: %q, want %q in it", tc.tools, text, w)
			}
		}
		for _, a := range tc.absent {
			if strings.Contains(text, a) {
				t.Errorf("%v: %q names %s, which the session cannot call", tc.tools, text, a)
			}
		}
	}

	// edit_file of a file that does not exist points at write_file only when the
	// session has it.
	sess := e.newSession("s-edit-only")
	sess.Tools = catalogOf{"read_file", "edit_file"}
	res := e.runIn(t, sess, "edit_file", map[string]any{"path": "none.txt", "old_string": "a", "new_string": "b"})
	if text := res.Text(); !res.IsError || !strings.Contains(text, "does not exist") || strings.Contains(text, "write_file") {
		t.Errorf("edit_file of a missing file without write_file: %s", text)
	}
	if text := e.runIn(t, e.sess, "edit_file", map[string]any{"path": "none.txt", "old_string": "a", "new_string": "b"}).Text(); !strings.Contains(text, "create it with write_file") {
		t.Errorf("edit_file of a missing file with every tool: %s", text)
	}
}
