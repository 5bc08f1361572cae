package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Job cgroups use the cgroup v1 pids controller: the launching thread writes its own
// tid into the job cgroup's "tasks" before it forks, so the command starts inside the
// cgroup with no window for an early fork to escape. cgroup v2 is not used: moving a
// single thread needs a threaded subtree that daemons rarely own.

// pidsCgroupParent returns the directory of this process's own cgroup in the v1 pids
// hierarchy.
func pidsCgroupParent() (string, error) {
	mounts, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer mounts.Close()
	var mountPoint string
	sc := bufio.NewScanner(mounts)
	for sc.Scan() {
		// "36 25 0:31 / /sys/fs/cgroup/pids rw,relatime shared:15 - cgroup cgroup rw,pids"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 || tail[0] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(tail[2], ",") {
			if opt == "pids" {
				mountPoint = fields[4]
			}
		}
	}
	if mountPoint == "" {
		return "", errors.New("no cgroup v1 pids hierarchy is mounted")
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(own)) {
		// "8:pids:/some/path"
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) == 3 && parts[1] == "pids" {
			return filepath.Join(mountPoint, parts[2]), nil
		}
	}
	return "", errors.New("this process is in no pids cgroup")
}

// probePidsCgroup checks that job cgroups can be created under parent.
func probePidsCgroup(parent string) error {
	dir, err := makePidsCgroup(parent, fmt.Sprintf("toolserverd-probe-%d-%d", os.Getpid(), time.Now().UnixNano()), 8)
	if err != nil {
		return err
	}
	return removeCgroup(dir)
}

// makePidsCgroup creates parent/name with pids.max = limit (no limit when limit <= 0).
func makePidsCgroup(parent, name string, limit int) (string, error) {
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if limit > 0 {
		if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(limit)), 0); err != nil {
			_ = os.Remove(dir)
			return "", err
		}
	}
	return dir, nil
}

// joinCgroup moves the calling OS thread (only it) into the cgroup.
func joinCgroup(dir string, tid int) error {
	return os.WriteFile(filepath.Join(dir, "tasks"), []byte(strconv.Itoa(tid)), 0)
}

// cgroupPIDs lists the processes in dir, leaving out this daemon: its launching
// thread sits in the job cgroup while the job runs.
func cgroupPIDs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != self {
			pids = append(pids, pid)
		}
	}
	return pids
}

// signalCgroup sends sig to every process of the cgroup and reports how many there
// were. A listed pid can in theory exit and be reused before the signal lands; the
// window is the few microseconds between reading cgroup.procs and kill(2).
func signalCgroup(dir string, sig syscall.Signal) int {
	pids := cgroupPIDs(dir)
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
	return len(pids)
}

// killCgroup SIGKILLs the cgroup until it is empty or the deadline passes; a fork
// bomb can fork between reading the list and the kill, so one pass is not enough.
func killCgroup(dir string, within time.Duration) {
	deadline := time.Now().Add(within)
	for signalCgroup(dir, syscall.SIGKILL) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// cgroupPeak reads pids.peak (0 when the kernel does not keep it).
func cgroupPeak(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "pids.peak"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// removeCgroup removes an empty cgroup, retrying briefly while exiting tasks leave it.
func removeCgroup(dir string) error {
	var err error
	for range 50 {
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}
