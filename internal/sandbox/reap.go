package sandbox

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Each Manager holds an exclusive flock on lockName in its state directory for its
// whole life. A daemon killed with SIGKILL leaves its directory (job logs, sandbox
// homes) and its pids and memory cgroups with the commands still running in them;
// the lock is released by the kernel. The next Manager on the same state dir takes
// such a lock, which tells it the owner is gone, kills what runs in the cgroups and
// removes them and the directory.
const lockName = "owner.lock"

// lockState creates and locks dir's lock file; the file stays open (and locked)
// until the Manager shuts down.
func lockState(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// staleUnlocked is how old a state directory without a lock file must be before it
// is taken for a dead instance's (one of a version without locks, or one that died
// between creating its directory and locking it).
const staleUnlocked = time.Minute

// reapStale removes the state directories under stateDir whose Manager is gone,
// except own, after killing the commands left in their cgroups under cgroupParents
// (the pids and memory parents; "" for a controller there is none of). It returns
// how many instances it cleaned up.
func reapStale(stateDir, own string, cgroupParents []string, log *slog.Logger) int {
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		dir := filepath.Join(stateDir, e.Name())
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "sandbox-") || dir == own {
			continue
		}
		if !ownerGone(dir) {
			continue
		}
		killed := 0
		for _, parent := range cgroupParents {
			if parent != "" {
				// The same processes are in both: count them once.
				killed = max(killed, reapCgroup(filepath.Join(parent, "toolserverd-"+e.Name())))
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("sandbox: removing a dead instance's state failed", "dir", dir, "err", err)
			continue
		}
		log.Info("sandbox: cleaned up after an instance that did not shut down", "dir", dir, "processes_killed", killed)
		n++
	}
	return n
}

// ownerGone reports whether no live Manager holds dir. The lock taken to find out
// is released at once: a Manager never takes an existing directory's lock, so
// nothing can claim the directory before it is removed (two Managers starting
// together may both remove it, which is harmless).
func ownerGone(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		fi, err := os.Stat(dir)
		return err == nil && time.Since(fi.ModTime()) > staleUnlocked
	}
	if err != nil {
		return false
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// reapCgroup kills every process in an instance cgroup and its job cgroups, then
// removes them; it returns how many processes it found.
func reapCgroup(dir string) int {
	jobs, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, j := range jobs {
		if !j.IsDir() {
			continue
		}
		sub := filepath.Join(dir, j.Name())
		n += len(cgroupPIDs(sub))
		killCgroup(sub, 2*time.Second)
		_ = removeCgroup(sub)
	}
	n += len(cgroupPIDs(dir))
	killCgroup(dir, 2*time.Second)
	_ = removeCgroup(dir)
	return n
}
