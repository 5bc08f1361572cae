package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Job cgroups use cgroup v1 controllers: pids (a bound on tasks, and a way to find
// every process of a job) and memory (a bound on what a job's processes may use). The
// launching thread writes its own tid into each job cgroup's "tasks" before it forks,
// so the command starts inside them with no window for an early fork to escape. cgroup
// v2 is not used: moving a single thread needs a threaded subtree that daemons rarely
// own. A thread joined to a memory cgroup charges nothing there: a process's memory is
// charged to the cgroup of its thread-group leader, which stays where it was.

// cgroupParent returns the directory of this process's own cgroup in the v1 hierarchy
// of controller ("pids", "memory").
func cgroupParent(controller string) (string, error) {
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
			if opt == controller {
				mountPoint = fields[4]
			}
		}
	}
	if mountPoint == "" {
		return "", fmt.Errorf("no cgroup v1 %s hierarchy is mounted", controller)
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(own)) {
		// "8:pids:/some/path", "4:memory:/some/path"
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), controller) {
			return filepath.Join(mountPoint, parts[2]), nil
		}
	}
	return "", fmt.Errorf("this process is in no %s cgroup", controller)
}

// probePidsCgroup checks that job cgroups can be created under parent.
func probePidsCgroup(parent string) error {
	dir, err := makePidsCgroup(parent, probeName(), 8)
	if err != nil {
		return err
	}
	return removeCgroup(dir)
}

// probeMemoryCgroup checks that job memory cgroups can be created and limited under
// parent.
func probeMemoryCgroup(parent string) error {
	dir, err := makeMemoryCgroup(parent, probeName(), 64<<20)
	if err != nil {
		return err
	}
	return removeCgroup(dir)
}

func probeName() string {
	return fmt.Sprintf("toolserverd-probe-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// makePidsCgroup creates parent/name with pids.max = limit (no limit when limit <= 0).
func makePidsCgroup(parent, name string, limit int) (string, error) {
	var set []cgroupSetting
	if limit > 0 {
		set = append(set, cgroupSetting{file: "pids.max", value: strconv.Itoa(limit)})
	}
	return makeCgroup(parent, name, set)
}

// makeMemoryCgroup creates parent/name with its memory (and, where the kernel
// accounts swap, memory plus swap) limited to limit bytes; no limit when limit <= 0.
func makeMemoryCgroup(parent, name string, limit int64) (string, error) {
	var set []cgroupSetting
	if limit > 0 {
		v := strconv.FormatInt(limit, 10)
		// memsw is memory plus swap and may not be set below the memory limit, so
		// it comes second; without swap accounting the file is missing.
		set = append(set, cgroupSetting{file: "memory.limit_in_bytes", value: v},
			cgroupSetting{file: "memory.memsw.limit_in_bytes", value: v, optional: true})
	}
	return makeCgroup(parent, name, set)
}

type cgroupSetting struct {
	file, value string
	optional    bool // a missing file is no error
}

// makeCgroup creates parent/name and writes set into it, removing it again when a
// write fails.
func makeCgroup(parent, name string, set []cgroupSetting) (string, error) {
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	for _, s := range set {
		err := os.WriteFile(filepath.Join(dir, s.file), []byte(s.value), 0)
		if err != nil && !(s.optional && errors.Is(err, os.ErrNotExist)) {
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
	return int(readCgroupInt(dir, "pids.peak"))
}

// memoryUse reads the most memory a job memory cgroup held and how many of its
// processes the kernel killed for reaching its limit (memory.oom_control's oom_kill,
// which older kernels lack: 0 then).
func memoryUse(dir string) (peak int64, oomKills int) {
	peak = readCgroupInt(dir, "memory.max_usage_in_bytes")
	b, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return peak, 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			oomKills, _ = strconv.Atoi(v)
		}
	}
	return peak, oomKills
}

// readCgroupInt reads a cgroup file holding one number (0 when it cannot).
func readCgroupInt(dir, file string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
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

// availableMemory is MemTotal, or the limit of the memory cgroup at cgroupDir when
// that is lower (0 when neither can be read).
func availableMemory(cgroupDir string) int64 {
	var total int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			// "MemTotal:       24591728 kB"
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				total = kb << 10
			}
		}
	}
	if cgroupDir == "" {
		return total
	}
	// An unlimited cgroup reads as a huge number (9223372036854771712).
	if limit := readCgroupInt(cgroupDir, "memory.limit_in_bytes"); limit > 0 && (total == 0 || limit < total) {
		total = limit
	}
	return total
}
