//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// flock is syscall.Flock; a test makes it fail as a file system without locks does.
var flock = syscall.Flock

// lockWait is how long Open waits for a lock another holder has before refusing.
const lockWait = 3 * time.Second

// lockSQLite takes an exclusive flock on path+".lock", held (the file kept open) until
// the store closes; the kernel releases it when the process dies, kill -9 included.
// A database another process holds is refused, naming that process: a second daemon
// on one data dir would mark the first one's running calls failed at its start (they
// look left by a crashed run of the same replica id) while they still run. A file
// system without flock (some network mounts: ENOLCK, ENOTSUP) is opened unlocked,
// as before, with an *unlockedError saying so.
func lockSQLite(path string) (*os.File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: create directory: %w", abs, err)
	}
	// SQLite opens the file a symbolic link leads to: the lock goes beside that file,
	// where any other spelling of it (another link, the directory through a link)
	// takes it too.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(dir, filepath.Base(abs))
	}
	name := abs + ".lock"
	// Not through a link: one planted there would have the file it leads to truncated.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			err = errors.New("it is a symbolic link, which the lock file never is: remove it")
		}
		return nil, fmt.Errorf("store: open sqlite %s: lock file %s: %w", abs, name, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("store: open sqlite %s: lock file %s is not a regular file: remove it", abs, name)
	}
	// A lock held a moment longer than its store (a process forked by the daemon
	// keeps a copy of the descriptor until it execs; a daemon or a migration exiting)
	// is waited for, briefly; only one held past that is another toolserverd's.
	err = flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	for deadline := time.Now().Add(lockWait); errors.Is(err, syscall.EWOULDBLOCK) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		err = flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, &unlockedError{path: name, err: err}
		}
		b, _ := os.ReadFile(name)
		_ = f.Close()
		holder := "another process"
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
			holder = "pid " + strconv.Itoa(pid)
		}
		return nil, fmt.Errorf("store: sqlite %s is in use by another toolserverd (%s, holding %s): stop it first, or give this one a data_dir (or store URL) of its own", abs, holder, name)
	}
	// Who holds it, for the refusal above; the lock is what counts.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
