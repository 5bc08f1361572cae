package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture builds a root with a directory, a file and symlinks of every kind next to
// an "outside" directory, and returns the resolver and the outside dir.
func fixture(t testing.TB) (resolver, string) {
	t.Helper()
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "dir", "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"in":            "dir",
		"abs_in":        filepath.Join(root, "dir"),
		"out":           outside,
		"out_rel":       "../outside",
		"etc":           "/etc",
		"dotdot":        "..",
		"dot":           ".",
		"loop1":         "loop2",
		"loop2":         "loop1",
		"self":          "self",
		"dangling_in":   "dir/missing",
		"dangling_out":  filepath.Join(outside, "missing"),
		"dir/up":        "..",
		"dir/upup":      "../..",
		"dir/sub/chain": "../../in",
		"via_out":       "out_rel/../root/dir",
		"passwd":        "/etc/passwd",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := newResolver(root)
	if err != nil {
		t.Fatal(err)
	}
	return r, outside
}

func TestResolve(t *testing.T) {
	t.Parallel()
	r, outside := fixture(t)
	root := r.root
	tests := []struct {
		path string
		want string // relative to root; "" with err set
		err  error
	}{
		{"", ".", nil},
		{".", ".", nil},
		{"file.txt", "file.txt", nil},
		{"./dir//sub/", "dir/sub", nil},
		{"dir/sub/..", "dir", nil},
		{"new/file", "new/file", nil},
		{"missing/../file.txt", "file.txt", nil},
		{"in", "dir", nil},
		{"in/sub", "dir/sub", nil},
		{"abs_in/sub", "dir/sub", nil},
		{"dot/dot/file.txt", "file.txt", nil},
		{"dir/up/file.txt", "file.txt", nil},
		{"dir/sub/chain/sub", "dir/sub", nil},
		{"dangling_in", "dir/missing", nil},
		{root + "/dir", "dir", nil},
		{root, ".", nil},

		{"..", "", ErrOutsideRoot},
		{"../outside", "", ErrOutsideRoot},
		{"dir/../../x", "", ErrOutsideRoot},
		{"missing/../../x", "", ErrOutsideRoot},
		{"/etc/passwd", "", ErrOutsideRoot},
		{root + "/../outside", "", ErrOutsideRoot},
		{root + "x", "", ErrOutsideRoot},
		{outside, "", ErrOutsideRoot},
		{"out", "", ErrOutsideRoot},
		{"out/anything", "", ErrOutsideRoot},
		{"out_rel", "", ErrOutsideRoot},
		{"etc/passwd", "", ErrOutsideRoot},
		{"passwd", "", ErrOutsideRoot},
		{"dotdot", "", ErrOutsideRoot},
		{"dotdot/root/file.txt", "", ErrOutsideRoot},
		{"dir/upup", "", ErrOutsideRoot},
		{"dangling_out", "", ErrOutsideRoot},
		{"via_out", "", ErrOutsideRoot},
		{"file.txt/../..", "", ErrOutsideRoot},
		{"loop1", "", ErrSymlinkLoop},
		{"self/x", "", ErrSymlinkLoop},
		{"a\x00b", "", ErrInvalidPath},
		{strings.Repeat("a/", 3000), "", ErrInvalidPath},
	}
	for _, tt := range tests {
		got, err := r.Resolve(tt.path)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("Resolve(%q) = %q, %v; want error %v", tt.path, got, err, tt.err)
			}
			var pe *PathError
			if err != nil && (!errors.As(err, &pe) || pe.Path != tt.path || pe.Root != root) {
				t.Errorf("Resolve(%q): error %#v is not a PathError naming the path and root", tt.path, err)
			}
			continue
		}
		want := filepath.Join(root, tt.want)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tt.path, got, err, want)
		}
	}
}

func TestResolveMessages(t *testing.T) {
	t.Parallel()
	r, _ := fixture(t)
	tests := []struct{ path, want string }{
		{"../x", `".." climbs above it`},
		{"etc/passwd", `symlink "etc" points to "/etc"`},
		{"/etc/passwd", "absolute paths must lie inside it"},
		{"loop1", "symlink loop"},
		{"a\x00", "NUL"},
	}
	for _, tt := range tests {
		_, err := r.Resolve(tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) && tt.path != "a\x00" {
			t.Errorf("Resolve(%q) error %v; want it to mention %q", tt.path, err, tt.want)
		}
	}
}

// TestResolveAlias: a root given through a symlink resolves to its physical path and
// accepts absolute paths spelled either way.
func TestResolveAlias(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(base, "alias")
	if err := os.Symlink(real, alias); err != nil {
		t.Fatal(err)
	}
	r, err := newResolver(alias)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{alias + "/f", real + "/f", "f"} {
		if got, err := r.Resolve(p); err != nil || got != filepath.Join(real, "f") {
			t.Errorf("Resolve(%q) = %q, %v; want %q", p, got, err, filepath.Join(real, "f"))
		}
	}
	if _, err := newResolver("relative/dir"); err == nil {
		t.Error("newResolver accepted a relative root")
	}
	if _, err := newResolver(filepath.Join(base, "missing")); err == nil {
		t.Error("newResolver accepted a missing root")
	}
}

// FuzzResolve: whatever the input, an accepted path is inside the root, and so is
// what its existing part physically resolves to.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/../..", "in/sub", "out", "dotdot/x", "loop1", "/etc",
		"dir/upup/x", "via_out/..", "abs_in/../file.txt", "dir/sub/chain/../..", "new/../../x", "/"} {
		f.Add(s)
	}
	r, _ := fixture(f)
	f.Fuzz(func(t *testing.T, p string) {
		got, err := r.Resolve(p)
		if err != nil {
			var pe *PathError
			if !errors.As(err, &pe) {
				t.Fatalf("Resolve(%q): error %v is not a *PathError", p, err)
			}
			return
		}
		if !r.inside(got) || filepath.Clean(got) != got {
			t.Fatalf("Resolve(%q) = %q, not a clean path inside %q", p, got, r.root)
		}
		existing := got
		for {
			if _, err := os.Lstat(existing); err == nil {
				break
			}
			existing = filepath.Dir(existing)
		}
		phys, err := filepath.EvalSymlinks(existing)
		if err != nil {
			t.Fatalf("EvalSymlinks(%q): %v", existing, err)
		}
		if !r.inside(phys) {
			t.Fatalf("Resolve(%q) = %q, whose existing part %q is really %q, outside %q", p, got, existing, phys, r.root)
		}
	})
}
