package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A workdir outside every root gets one answer whether or not the path exists, is a
// file, or is reached through a link: the roots are checked before the disk is
// asked, so a client cannot probe the host's paths by creating sessions.
func TestWorkdirOutsideRootsSameAnswer(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.Mkdir(filepath.Join(outside, "dir"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(outside, "locked")
	if err := os.Mkdir(locked, 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(locked, 0o750) })
	for name, target := range map[string]string{"toDir": "dir", "toFile": "file", "toMissing": "missing"} {
		if err := os.Symlink(filepath.Join(outside, target), filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	e := newEvictEnv(t, Config{WorkdirRoots: []string{root}})
	outsideCases := []string{
		filepath.Join(outside, "dir"),
		filepath.Join(outside, "missing"),
		filepath.Join(outside, "missing", "deeper"),
		filepath.Join(outside, "file"),
		filepath.Join(outside, "file", "x"),
		filepath.Join(locked, "x"),
		filepath.Join(root, "toDir"),
		filepath.Join(root, "toMissing"),
		filepath.Join(root, "toFile", "x"),
		filepath.Join(root, "toMissing", "x"),
		filepath.Join(root, "..", filepath.Base(outside), "missing"),
	}
	for _, wd := range outsideCases {
		_, _, err := e.m.Create(context.Background(), "t1", Spec{Workdir: wd})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("workdir %s: err %v, want ErrInvalid", wd, err)
		}
		want := ErrInvalid.Error() + ": workdir " + wd + " is not under an allowed root (config sessions.workdir_roots)"
		if err.Error() != want {
			t.Errorf("workdir %s:\n got %q\nwant %q", wd, err, want)
		}
	}
	// Under a root the client is told what is wrong.
	if err := os.WriteFile(filepath.Join(root, "afile"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for wd, want := range map[string]string{
		filepath.Join(root, "missing"): "does not exist",
		filepath.Join(root, "afile"):   "is not a directory",
	} {
		_, _, err := e.m.Create(context.Background(), "t1", Spec{Workdir: wd})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("workdir %s: err %v, want %q", wd, err, want)
		}
	}
	if _, _, err := e.m.Create(context.Background(), "t1", Spec{Workdir: filepath.Join(root, "toDir", "..", "toDir")}); err == nil {
		t.Errorf("a link out of the root was accepted")
	}
}
