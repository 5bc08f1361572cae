//go:build unix

package store

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenWithoutFlockSaysSo: on a file system that refuses flock for another reason
// than another holder (ENOLCK on some network mounts), Open still opens the database,
// as before the lock existed, and the store says it is unlocked (the daemon warns), so
// that nothing keeps a second daemon off it is not silent.
func TestOpenWithoutFlockSaysSo(t *testing.T) {
	flock = func(int, int) error { return syscall.ENOLCK }
	t.Cleanup(func() { flock = syscall.Flock })
	dir := t.TempDir()
	first, err := Open(t.Context(), Config{DataDir: dir})
	if err != nil {
		t.Fatalf("Open without flock: %v", err)
	}
	defer first.Close()
	u := first.(*SQLite).Unlocked()
	if u == nil || !strings.Contains(u.Error(), "cannot be locked") || !strings.Contains(u.Error(), filepath.Join(dir, SQLiteFileName+".lock")) {
		t.Fatalf("Unlocked() = %v, want why the database is not locked, naming the lock file", u)
	}
	flock = syscall.Flock
	second, err := Open(t.Context(), Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if u := second.(*SQLite).Unlocked(); u != nil {
		t.Errorf("a locked database says %v", u)
	}
}

// TestOpenWaitsForALockReleasedSoon: the lock file's descriptor can outlive its store
// for a moment (a process the daemon forks holds a copy until it execs; here a dup
// stands for it), so a restart in the same breath found the database "in use by
// another toolserverd" (a restart test failed so under load). Open waits briefly for
// such a lock instead of refusing.
func TestOpenWaitsForALockReleasedSoon(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(t.Context(), Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	child, err := syscall.Dup(int(first.(*SQLite).lock.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		syscall.Close(child)
	}()
	second, err := Open(t.Context(), Config{DataDir: dir})
	if err != nil {
		t.Fatalf("Open while the closed store's lock lingered in a copy of its descriptor: %v", err)
	}
	second.Close()
}
