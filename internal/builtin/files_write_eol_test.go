package builtin

import (
	"strings"
	"testing"
)

// TestWriteFileKeepsCRLF: write_file over a file that used CRLF line endings
// throughout wrote the model's LF content as given, turning the whole file to LF (a
// diff of every line). edit_file already kept CRLF. An existing file that used CRLF
// consistently keeps it; a new file, a file with mixed or LF endings, and content
// that is not text are written as given.
func TestWriteFileKeepsCRLF(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	cases := []struct {
		name, old, content, want string
		kept                     bool
	}{
		{"crlf file, lf content", "a\r\nb\r\n", "x\ny\nz", "x\r\ny\r\nz", true},
		{"crlf file, mixed content", "a\r\nb\r\n", "x\r\ny\n", "x\r\ny\r\n", true},
		{"crlf file, crlf content", "a\r\n", "x\r\ny\r\n", "x\r\ny\r\n", false},
		{"crlf file, one line", "a\r\n", "x", "x", false},
		{"mixed file", "a\r\nb\n", "x\ny\n", "x\ny\n", false},
		{"lf file", "a\nb\n", "x\ny\n", "x\ny\n", false},
		{"no line ending", "a", "x\ny\n", "x\ny\n", false},
	}
	for i, c := range cases {
		path := "f" + strings.Repeat("x", i) + ".txt"
		e.put(t, path, c.old)
		e.ok(t, "read_file", map[string]any{"path": path})
		res := e.ok(t, "write_file", map[string]any{"path": path, "content": c.content})
		if got := e.disk(t, path); got != c.want {
			t.Errorf("%s: wrote %q, want %q", c.name, got, c.want)
		}
		if kept := strings.Contains(res.Text(), "CRLF"); kept != c.kept {
			t.Errorf("%s: result %q, want CRLF said: %v", c.name, res.Text(), c.kept)
		}
	}
	// A new file is written as given.
	e.ok(t, "write_file", map[string]any{"path": "new.txt", "content": "x\ny\n"})
	if got := e.disk(t, "new.txt"); got != "x\ny\n" {
		t.Errorf("new file: %q", got)
	}
}
