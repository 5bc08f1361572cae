package builtin

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestSymlinkSwappedInAfterTheCheck: a command running beside the file tools (a
// background job) can put a symlink where a path's file or directory was, between
// the check of the path (Sandbox.Resolve) and its use. The os.Root the I/O goes
// through keeps it inside the working directory, but a workdir that holds the
// daemon's data dir has it inside too: a read or a write then reached the data dir
// (admin.key, the database), which isolated commands cannot even see. The swap is
// made here between the two steps, where a racing command would make it.
func TestSymlinkSwappedInAfterTheCheck(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	data := filepath.Join(work, "data")
	for name, content := range map[string]string{
		"data/admin.key":   "tsk_secret",
		"f.txt":            "harmless\n",
		"sub/admin.key":    "harmless\n",
		"out/keep.txt":     "harmless\n",
		"walk/admin.key":   "harmless\n",
		"walkdir/keep.txt": "harmless\n",
	} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := newFileEnvIn(t, work, sandbox.Config{Hide: []string{data}})
	w, err := openFileRoot(e.m, &tool.Context{Context: context.Background(), Session: e.sess})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// swap replaces rel with a symlink to target, as a racing command would.
	swap := func(rel, target string) {
		t.Helper()
		p := filepath.Join(work, rel)
		if err := os.Rename(p, p+".was"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	resolve := func(rel string) fileTarget {
		t.Helper()
		tg, err := w.resolveFile(rel)
		if err != nil {
			t.Fatalf("resolve %s: %v", rel, err)
		}
		return tg
	}
	readAll := func(f *os.File) string {
		defer f.Close()
		b, _ := io.ReadAll(f)
		return string(b)
	}

	tg := resolve("f.txt")
	swap("f.txt", "data/admin.key")
	if f, _, err := w.openRegular(tg); err == nil {
		t.Errorf("a file swapped for a symlink into the data dir was opened: %q", readAll(f))
	} else if !strings.Contains(err.Error(), "changed") {
		t.Errorf("the error does not say the path changed: %v", err)
	}

	tg = resolve("sub/admin.key")
	swap("sub", "data")
	if f, _, err := w.openRegular(tg); err == nil {
		t.Errorf("a directory swapped for a symlink into the data dir was read through: %q", readAll(f))
	}

	tg = resolve("out/new.txt")
	swap("out", "data")
	if _, err := w.writeAtomic(tg, []byte("pwned"), newFileMode, false); err == nil {
		t.Errorf("a write went through a directory swapped for a symlink into the data dir")
	}
	tg = resolve("out2/new.txt")
	if err := os.Symlink("data", filepath.Join(work, "out2")); err != nil { // appeared after the check
		t.Fatal(err)
	}
	if _, err := w.writeAtomic(tg, []byte("pwned"), newFileMode, true); err == nil {
		t.Errorf("a write went through a directory that appeared as a symlink into the data dir")
	}
	tg = resolve("mk/deeper/new.txt")
	if err := os.Symlink("data", filepath.Join(work, "mk")); err != nil { // appeared after the check
		t.Fatal(err)
	}
	if _, err := w.writeAtomic(tg, []byte("pwned"), newFileMode, true); err == nil {
		t.Errorf("a write made its parent directories through a symlink into the data dir")
	}
	ents, _ := os.ReadDir(data)
	for _, ent := range ents {
		if ent.Name() != "admin.key" {
			t.Errorf("the data dir got %s", ent.Name())
		}
	}

	// The walks of grep, tree and glob open what they listed, by name.
	swap("walk", "data")
	if f, err := w.openNonBlocking("walk/admin.key"); err == nil {
		t.Errorf("a listed directory swapped for a symlink into the data dir was read through: %q", readAll(f))
	}
	if b, _ := os.ReadFile(filepath.Join(data, "admin.key")); string(b) != "tsk_secret" {
		t.Errorf("admin.key holds %q", b)
	}
}

// TestPathErrorNamedOnce: a file system error Resolve met on the way (a symlink
// replaced by a file between its lstat and its readlink, under a racing command)
// names the path once, not as `path "f.txt": path "f.txt": readlink …`.
func TestPathErrorNamedOnce(t *testing.T) {
	t.Parallel()
	err := filePathError("f.txt", &sandbox.PathError{Path: "f.txt", Root: "/w", Err: &os.PathError{Op: "readlink", Path: "/w/f.txt", Err: syscall.EINVAL}})
	res := tool.FromError(err)
	if strings.Count(res.Text(), `"f.txt"`) != 1 || res.ErrorKind != tool.KindFailed {
		t.Errorf("kind %q: %s", res.ErrorKind, res.Text())
	}
}
