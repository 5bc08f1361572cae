package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/toolserverd/toolserverd/internal/fds"
)

// launch is how to start one process.
type launch struct {
	path string   // the executable; argv[0] when empty
	argv []string // argv[0] is an absolute path unless path is set
	env  []string
	dir  string
	attr *syscall.SysProcAttr
	// cgroups are joined by the forking thread before the fork.
	cgroups []string
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
		for _, dir := range l.cgroups {
			if err := joinCgroup(dir, unix.Gettid()); err != nil {
				started <- err
				return
			}
		}
		fds.CloseInheritedOnExec()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
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
// score needs no privilege. It is set by the command's first process itself, before
// anything of the command can fork (a score is inherited by a fork and kept across
// exec): by the namespaces backend's helper, and for the others by oomShim.
const commandOOMScoreAdj = "1000"

// setOOMScoreAdj raises the OOM score adjustment of /proc/<pid> ("self" for this
// process) to commandOOMScoreAdj.
func setOOMScoreAdj(pid string) error {
	return os.WriteFile("/proc/"+pid+"/oom_score_adj", []byte(commandOOMScoreAdj), 0)
}

// oomShim makes l start as bash setting its own OOM score, then exec'ing l's program
// in its place (same process: its group, parent-death signal and cgroup stay). Set
// by the daemon after the start instead, the score came too late for bwrap, which
// forks its sandbox at once (seen under load). One more exec of bash: about a
// millisecond.
func oomShim(bash string, l launch) launch {
	prog := l.path
	if prog == "" {
		prog = l.argv[0]
	}
	script := "echo " + commandOOMScoreAdj + ` >/proc/self/oom_score_adj 2>/dev/null; exec "$@"`
	l.argv = append([]string{bash, "-c", script, "toolserverd-oom-shim", prog}, l.argv[1:]...)
	l.path = bash
	return l
}
