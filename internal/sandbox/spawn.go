package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// launch is how to start one process.
type launch struct {
	path string   // the executable; argv[0] when empty
	argv []string // argv[0] is an absolute path unless path is set
	env  []string
	dir  string
	attr *syscall.SysProcAttr
	// cgroup, when set, is joined by the forking thread before the fork.
	cgroup string
}

// spawn starts l on a dedicated OS thread that it keeps until the process has exited.
// The thread is dedicated because the kernel ties Pdeathsig (and bwrap's
// --die-with-parent) to the parent *thread*, and because a thread that joined a job
// cgroup must never run anything else: it is ended by returning from the goroutine
// while still locked. The Go runtime creates new threads from a clean template thread
// when asked on a locked one, so the cgroup does not leak into the daemon.
//
// After the process exits (it is still a zombie: waitid WNOWAIT) exited runs on that
// thread; it must reap the process with cmd.Wait.
func spawn(l launch, stdin, stdout, stderr *os.File, exited func(*exec.Cmd)) (*exec.Cmd, error) {
	path := l.path
	if path == "" {
		path = l.argv[0]
	}
	cmd := &exec.Cmd{
		Path: path, Args: l.argv, Env: l.env, Dir: l.dir,
		Stdin: stdin, Stdout: stdout, Stderr: stderr,
		SysProcAttr: l.attr,
	}
	started := make(chan error, 1)
	run := func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if l.cgroup != "" {
			if err := joinCgroup(l.cgroup, unix.Gettid()); err != nil {
				started <- err
				return
			}
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		_ = setOOMScoreAdj(strconv.Itoa(cmd.Process.Pid))
		started <- nil
		waitExited(cmd.Process.Pid)
		exited(cmd)
	}
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			run()
			return
		}
		// The main thread is never ended, even when left locked. Hand the work to a
		// goroutine, which cannot run here while this one holds the thread.
		done := make(chan struct{})
		go func() {
			defer close(done)
			run()
		}()
		<-done
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return cmd, nil
}

// waitExited blocks until pid has exited, without reaping it: while it is a zombie
// its pid (and process group id) cannot be reused, so signalling the group is safe.
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// commandOOMScoreAdj is the OOM score adjustment of every command: the most, so that
// when memory runs out (a command filling it, in a container whose limit it reaches)
// the kernel kills commands before the daemon, whose score is left as it is. Raising a
// score needs no privilege.
//
// The daemon writes it for the process it started as soon as the start returns; a
// process that one forks in the few microseconds before keeps the daemon's score. The
// namespaces backend's helper writes its own first, before anything can fork.
const commandOOMScoreAdj = "1000"

// setOOMScoreAdj raises the OOM score adjustment of /proc/<pid> ("self" for this
// process) to commandOOMScoreAdj.
func setOOMScoreAdj(pid string) error {
	return os.WriteFile("/proc/"+pid+"/oom_score_adj", []byte(commandOOMScoreAdj), 0)
}
