package builtin

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestHostilePaths gives every file tool every kind of path that must be refused and
// checks that each call is an invalid_args error, shows nothing from outside the
// working directory and writes nothing anywhere.
func TestHostilePaths(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	outside := t.TempDir()
	const secret = "TOP SECRET\n"
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "c.json"), []byte(`{"SECRET":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e.symlink(t, outside, "escape")
	e.symlink(t, filepath.Join(outside, "secret.txt"), "outfile")
	e.symlink(t, "../"+filepath.Base(outside)+"/c.json", "relout.json")
	e.symlink(t, "loop", "loop")
	e.symlink(t, "loopb", "loopa")
	e.symlink(t, "loopa", "loopb")
	e.put(t, "inside.txt", "harmless\n")

	paths := []string{
		"../secret.txt",
		"../" + filepath.Base(outside) + "/secret.txt",
		"sub/../../" + filepath.Base(outside) + "/secret.txt",
		"inside.txt\x00.png",
		filepath.Join(outside, "secret.txt"),
		"/etc/passwd",
		"/",
		"loop",
		"loopa/x",
		"escape",
		"escape/secret.txt",
		"outfile",
		"relout.json",
		strings.Repeat("a/", 2100) + "x",
	}
	calls := map[string]func(p string) map[string]any{
		"read_file":  func(p string) map[string]any { return map[string]any{"path": p} },
		"write_file": func(p string) map[string]any { return map[string]any{"path": p, "content": "pwned"} },
		"edit_file": func(p string) map[string]any {
			return map[string]any{"path": p, "old_string": "TOP", "new_string": "pwned"}
		},
		"multi_edit": func(p string) map[string]any {
			return map[string]any{"path": p, "edits": []map[string]any{{"old_string": "TOP", "new_string": "pwned"}}}
		},
		"list_dir": func(p string) map[string]any { return map[string]any{"path": p} },
		"tree":     func(p string) map[string]any { return map[string]any{"path": p} },
		"glob":     func(p string) map[string]any { return map[string]any{"pattern": "*", "path": p} },
		"grep":     func(p string) map[string]any { return map[string]any{"pattern": "SECRET", "path": p} },
		"json_read": func(p string) map[string]any {
			return map[string]any{"path": p, "pointer": ""}
		},
		"json_write": func(p string) map[string]any {
			return map[string]any{"path": p, "pointer": "/SECRET", "value": "pwned", "create_missing": true}
		},
	}
	if len(calls) != len(e.tools) {
		t.Fatalf("%d tools covered of %d", len(calls), len(e.tools))
	}
	for name, mk := range calls {
		for _, p := range paths {
			res := e.run(t, name, mk(p))
			if !res.IsError || res.ErrorKind != tool.KindInvalidArgs {
				t.Errorf("%s(%q): is_error=%v kind=%q: %s", name, p, res.IsError, res.ErrorKind, res.Text())
			}
			if strings.Contains(res.Text(), "TOP SECRET") || strings.Contains(res.Text(), "root:") {
				t.Errorf("%s(%q) showed outside content: %s", name, p, res.Text())
			}
		}
	}
	// Glob patterns that climb out are refused too.
	for _, pat := range []string{"../*", "../" + filepath.Base(outside) + "/*", filepath.Join(outside, "*"), "escape/*", "/etc/*"} {
		e.fail(t, "glob", map[string]any{"pattern": pat}, tool.KindInvalidArgs)
	}
	// Walking the whole tree neither follows nor reads through the bad symlinks.
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"grep", map[string]any{"pattern": "SECRET|pwned"}},
		{"glob", map[string]any{"pattern": "**/*"}},
		{"tree", map[string]any{"show_hidden": true}},
		{"list_dir", map[string]any{"depth": 5}},
	} {
		res := e.ok(t, c.name, c.args)
		if strings.Contains(res.Text(), "secret.txt") && c.name != "tree" && c.name != "list_dir" || strings.Contains(res.Text(), "TOP SECRET") {
			t.Errorf("%s reached outside: %s", c.name, res.Text())
		}
	}
	// Nothing was written outside, nor anywhere inside.
	ents, err := os.ReadDir(outside)
	if err != nil || len(ents) != 2 {
		t.Fatalf("outside holds %v (%v)", ents, err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != secret {
		t.Errorf("secret.txt changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "c.json")); string(b) != `{"SECRET":1}` {
		t.Errorf("c.json changed: %q", b)
	}
	inside, _ := os.ReadDir(e.dir)
	if len(inside) != 7 {
		t.Errorf("the working directory holds %d entries, want 7 (nothing new)", len(inside))
	}
}

// TestFileOrDirectory checks that a directory is refused where a file is expected and
// the other way round.
func TestFileOrDirectory(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "d/f.txt", "text\n")
	e.put(t, "d/c.json", "{}")
	dirArgs := map[string]map[string]any{
		"read_file":  {"path": "d"},
		"write_file": {"path": "d", "content": "x"},
		"edit_file":  {"path": "d", "old_string": "a", "new_string": "b"},
		"multi_edit": {"path": "d", "edits": []map[string]any{{"old_string": "a", "new_string": "b"}}},
		"json_read":  {"path": "d"},
		"json_write": {"path": "d", "pointer": "", "value": 1},
	}
	for name, args := range dirArgs {
		res := e.fail(t, name, args, tool.KindInvalidArgs, "directory")
		_ = res
	}
	for name, args := range map[string]map[string]any{
		"list_dir": {"path": "d/f.txt"},
		"tree":     {"path": "d/f.txt"},
		"glob":     {"pattern": "*", "path": "d/f.txt"},
	} {
		e.fail(t, name, args, tool.KindInvalidArgs, "is a file, not a directory")
	}
	// grep takes either.
	res := e.ok(t, "grep", map[string]any{"pattern": "text", "path": "d/f.txt"})
	fileContains(t, res.Text(), "d/f.txt:1: text")
	// Missing paths.
	for name, args := range map[string]map[string]any{
		"list_dir":  {"path": "nope"},
		"glob":      {"pattern": "*", "path": "nope"},
		"grep":      {"pattern": "x", "path": "nope"},
		"json_read": {"path": "nope.json"},
		"read_file": {"path": "d/nope.txt"},
	} {
		e.fail(t, name, args, tool.KindNotFound, "does not exist")
	}
	if got := e.disk(t, "d/f.txt"); got != "text\n" {
		t.Errorf("d/f.txt holds %q", got)
	}
}

// TestNamedPipes checks that no tool blocks on a named pipe, wherever it is.
func TestNamedPipes(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "sub/a.txt", "needle\n")
	for _, p := range []string{"pipe", ".gitignore", "sub/.gitignore"} {
		if err := syscall.Mkfifo(filepath.Join(e.dir, p), 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	e.fail(t, "read_file", map[string]any{"path": "pipe"}, tool.KindInvalidArgs, "named pipe")
	e.fail(t, "write_file", map[string]any{"path": "pipe", "content": "x"}, tool.KindInvalidArgs, "named pipe")
	e.fail(t, "json_read", map[string]any{"path": "pipe"}, tool.KindInvalidArgs, "named pipe")
	e.fail(t, "grep", map[string]any{"pattern": "x", "path": "pipe"}, tool.KindInvalidArgs, "named pipe")
	res := e.ok(t, "grep", map[string]any{"pattern": "needle"})
	fileContains(t, res.Text(), "sub/a.txt:1: needle")
	res = e.ok(t, "tree", map[string]any{"show_hidden": true})
	fileContains(t, res.Text(), "pipe  [a named pipe]")
	res = e.ok(t, "list_dir", map[string]any{})
	fileContains(t, res.Text(), "pipe  [a named pipe]")
}

// TestUnixSockets: a socket in the working directory (an editor's or a dev server's)
// is refused as not a regular file, as a named pipe is. read_file answered the error
// of opening one ("openat sock: no such device or address", kind failed).
func TestUnixSockets(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(e.dir, "sock"), Net: "unix"})
	if err != nil {
		t.Skipf("unix socket: %v", err)
	}
	defer l.Close()
	e.fail(t, "read_file", map[string]any{"path": "sock"}, tool.KindInvalidArgs, `"sock" is a socket, not a regular file`)
	e.fail(t, "json_read", map[string]any{"path": "sock"}, tool.KindInvalidArgs, `"sock" is a socket, not a regular file`)
	e.fail(t, "grep", map[string]any{"pattern": "x", "path": "sock"}, tool.KindInvalidArgs, `"sock" is a socket, not a regular file`)
	e.fail(t, "write_file", map[string]any{"path": "sock", "content": "x"}, tool.KindInvalidArgs, `"sock" is a socket, not a regular file`)
}

// TestLongestNames: a name as long as the file system allows (255 bytes) can be
// written, edited and written as JSON like any other. The temporary file each write
// goes through took the name plus 18 bytes, so every name of 238 bytes or more was
// refused as "a name in it is too long", though a command could create it.
func TestLongestNames(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	for _, n := range []int{237, 238, 254, 255} {
		name := "sub/" + strings.Repeat("n", n-len(".txt")) + ".txt"
		e.ok(t, "write_file", map[string]any{"path": name, "content": "one\n"})
		e.ok(t, "read_file", map[string]any{"path": name})
		e.ok(t, "edit_file", map[string]any{"path": name, "old_string": "one", "new_string": "two"})
		if got := e.disk(t, name); got != "two\n" {
			t.Errorf("%d bytes: the file holds %q", n, got)
		}
		// Multi-byte characters: the temporary name is cut on a character boundary.
		name = strings.Repeat("é", (n-5)/2) + strings.Repeat("x", (n-5)%2) + ".json"
		e.ok(t, "json_write", map[string]any{"path": name, "pointer": "", "value": map[string]any{"a": 1}})
		if got := e.disk(t, name); !strings.Contains(got, `"a": 1`) {
			t.Errorf("%d bytes: %q holds %q", n, name, got)
		}
	}
	ents, err := os.ReadDir(filepath.Join(e.dir, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if strings.Contains(ent.Name(), ".tmp-") {
			t.Errorf("a temporary file was left: %s", ent.Name())
		}
	}
}
