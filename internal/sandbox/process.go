package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A BoundedProcess is a process the daemon starts for itself, not a command of a
// session (tool_chain's Starlark worker): it runs the daemon's own code, in a memory
// cgroup of its own when the host allows, so that the kernel, not the Go runtime of the
// daemon, answers when it asks for more memory than it may have. It is started like a
// job (see spawn): the forking thread joins the cgroup, stays until the process has
// exited, and its end SIGKILLs the process (Pdeathsig), so it never outlives the daemon.
type BoundedProcess struct {
	Pid int

	dir    string // memory cgroup, "" without one
	exited chan struct{}

	mu     sync.Mutex
	reaped bool
	exit   BoundedExit
}

// BoundedExit is how a BoundedProcess ended.
type BoundedExit struct {
	// State is the process's exit status; Err is Wait's error.
	State *os.ProcessState
	Err   error
	// Cgroup reports whether the process ran in a memory cgroup; MemoryPeak is the
	// most memory that held, OOMKills how many processes the kernel killed in it for
	// reaching its limit (0 on kernels that do not count them).
	Cgroup     bool
	MemoryPeak int64
	OOMKills   int
}

// MemoryCgroupParent returns the memory cgroup (v1) of this process, under which
// BoundedProcesses get theirs, after checking that one can be made and limited there.
func MemoryCgroupParent() (string, error) {
	parent, err := cgroupParent("memory")
	if err != nil {
		return "", err
	}
	if err := probeMemoryCgroup(parent); err != nil {
		return "", err
	}
	return parent, nil
}

// StartBounded starts path with argv and env, its standard files set to the three
// given, in a new memory cgroup parent/name whose memory and swap are limited to limit
// bytes; with parent "" it starts it in no cgroup. The cgroup is removed once the
// process has exited (see Done).
func StartBounded(parent, name string, limit int64, path string, argv, env []string, stdin, stdout, stderr *os.File) (*BoundedProcess, error) {
	p := &BoundedProcess{exited: make(chan struct{})}
	l := launch{path: path, argv: argv, env: env, attr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	if parent != "" {
		dir, err := makeMemoryCgroup(parent, name, limit)
		if err != nil {
			return nil, err
		}
		p.dir = dir
		l.cgroups = []string{dir}
	}
	cmd, err := spawn(l, stdin, stdout, stderr, func(c *exec.Cmd) {
		p.mu.Lock()
		p.reaped = true
		p.mu.Unlock()
		ex := BoundedExit{Err: c.Wait(), State: c.ProcessState, Cgroup: p.dir != ""}
		if p.dir != "" {
			ex.MemoryPeak, ex.OOMKills = memoryUse(p.dir)
			// This thread sits in the cgroup: out of it first, or it cannot be removed.
			_ = joinCgroup(filepath.Dir(p.dir), unix.Gettid())
			_ = removeCgroup(p.dir)
		}
		p.mu.Lock()
		p.exit = ex
		p.mu.Unlock()
		close(p.exited)
	})
	if err != nil {
		if p.dir != "" {
			_ = removeCgroup(p.dir)
		}
		return nil, err
	}
	p.Pid = cmd.Process.Pid
	return p, nil
}

// Kill sends SIGKILL to the process unless it has been reaped already (its pid could
// then be another process's).
func (p *BoundedProcess) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		_ = syscall.Kill(p.Pid, syscall.SIGKILL)
	}
}

// Done is closed once the process has exited, has been reaped and its cgroup removed.
func (p *BoundedProcess) Done() <-chan struct{} { return p.exited }

// Exit reports how the process ended; valid once Done is closed.
func (p *BoundedProcess) Exit() BoundedExit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}
