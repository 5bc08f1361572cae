package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Capabilities is what the host supports, found by trying it. The daemon reports it
// in /readyz and its logs.
type Capabilities struct {
	// Bash is the shell commands run in; BashError says why there is none.
	Bash      string `json:"bash"`
	BashError string `json:"bash_error,omitempty"`
	// Bwrap is the path of bubblewrap, BwrapUsable whether a sandbox could be started.
	Bwrap        string `json:"bwrap,omitempty"`
	BwrapVersion string `json:"bwrap_version,omitempty"`
	BwrapUsable  bool   `json:"bwrap_usable"`
	BwrapError   string `json:"bwrap_error,omitempty"`
	// UserNamespaces reports whether new user+mount+pid+net namespaces can be made.
	UserNamespaces      bool   `json:"user_namespaces"`
	UserNamespacesError string `json:"user_namespaces_error,omitempty"`
	// LandlockABI is the kernel's Landlock version (0: none).
	LandlockABI   int    `json:"landlock_abi"`
	LandlockError string `json:"landlock_error,omitempty"`
	// NamespacesUsable reports whether the namespaces backend (namespaces, read-only
	// mounts, no capabilities, Landlock) started a command.
	NamespacesUsable bool   `json:"namespaces_usable"`
	NamespacesError  string `json:"namespaces_error,omitempty"`
	// PidsCgroup is where job pids cgroups can be created ("" when they cannot).
	PidsCgroup      string `json:"pids_cgroup,omitempty"`
	PidsCgroupError string `json:"pids_cgroup_error,omitempty"`
	// MemoryCgroup is where job memory cgroups can be created ("" when they cannot).
	MemoryCgroup      string `json:"memory_cgroup,omitempty"`
	MemoryCgroupError string `json:"memory_cgroup_error,omitempty"`
	// Memory is the memory this process may use: the host's (MemTotal) or its
	// memory cgroup's limit, whichever is lower (0: unknown).
	Memory int64 `json:"memory_bytes,omitempty"`
	// Isolation is the backend BackendAuto picks; empty when the host cannot isolate.
	Isolation      Backend `json:"isolation,omitempty"`
	IsolationError string  `json:"isolation_error,omitempty"`
}

// Detect probes the host: it looks for bash and bwrap and starts throwaway commands
// under each isolation mechanism. It takes a few tens of milliseconds.
func Detect() Capabilities {
	var c Capabilities
	errText := func(err error) string { return err.Error() }
	if st, err := os.Stat("/bin/bash"); err == nil && st.Mode()&0o111 != 0 {
		c.Bash = "/bin/bash"
	} else if p, err := exec.LookPath("bash"); err == nil {
		c.Bash = p
	} else {
		c.BashError = "bash is not installed (not at /bin/bash nor on PATH)"
	}
	if abi, err := landlockABI(); err != nil {
		c.LandlockError = errText(err)
	} else {
		c.LandlockABI = abi
	}
	if parent, err := cgroupParent("pids"); err != nil {
		c.PidsCgroupError = errText(err)
	} else if err := probePidsCgroup(parent); err != nil {
		c.PidsCgroupError = errText(err)
	} else {
		c.PidsCgroup = parent
	}
	memParent, err := cgroupParent("memory")
	if err != nil {
		c.MemoryCgroupError = errText(err)
	} else if err := probeMemoryCgroup(memParent); err != nil {
		c.MemoryCgroupError = errText(err)
	} else {
		c.MemoryCgroup = memParent
	}
	c.Memory = availableMemory(memParent)
	if c.Bash == "" {
		c.IsolationError = c.BashError
		return c
	}
	probeDir, err := os.MkdirTemp("", "toolserverd-probe-")
	if err != nil {
		c.IsolationError = errText(err)
		return c
	}
	defer os.RemoveAll(probeDir)

	if p, err := exec.LookPath("bwrap"); err != nil {
		c.BwrapError = "bubblewrap (bwrap) is not installed"
	} else {
		c.Bwrap = p
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, err := exec.CommandContext(ctx, p, "--version").Output()
		cancel()
		c.BwrapVersion = strings.TrimSpace(string(out))
		if err == nil {
			err = runProbe(bwrapLaunch(p, c.Bash, probeDir, "exit 0", nil, []string{probeDir}, nil, nil, false))
		}
		if err != nil {
			c.BwrapError = errText(err)
		} else {
			c.BwrapUsable = true
		}
	}
	userns := localLaunch(c.Bash, probeDir, "exit 0", nil)
	userns.attr = nsAttr(false)
	if err := runProbe(userns); err != nil {
		c.UserNamespacesError = errText(err)
	} else {
		c.UserNamespaces = true
	}
	switch {
	case !c.UserNamespaces:
		c.NamespacesError = "user namespaces are not available: " + c.UserNamespacesError
	case c.LandlockABI < minLandlockABI:
		c.NamespacesError = fmt.Sprintf("Landlock is not available (ABI %d, need %d): %s", c.LandlockABI, minLandlockABI, c.LandlockError)
	default:
		l, err := namespacesLaunch(c.Bash, probeDir, "exit 0", nil, []string{probeDir}, nil, nil, false, c.LandlockABI)
		if err == nil {
			err = runProbe(l)
		}
		if err != nil {
			c.NamespacesError = errText(err)
		} else {
			c.NamespacesUsable = true
		}
	}
	if b, err := c.backend(BackendAuto); err != nil {
		c.IsolationError = err.Error()
	} else {
		c.Isolation = b
	}
	return c
}

// backend picks the isolated backend for want, or says why there is none.
func (c Capabilities) backend(want Backend) (Backend, error) {
	switch {
	case c.Bash == "":
		return "", fmt.Errorf("%w: %s", ErrIsolationUnavailable, c.BashError)
	case (want == BackendAuto || want == BackendBwrap) && c.BwrapUsable:
		return BackendBwrap, nil
	case (want == BackendAuto || want == BackendNamespaces) && c.NamespacesUsable:
		return BackendNamespaces, nil
	case want == BackendBwrap:
		return "", fmt.Errorf("%w: bubblewrap: %s", ErrIsolationUnavailable, c.BwrapError)
	case want == BackendNamespaces:
		return "", fmt.Errorf("%w: namespaces: %s", ErrIsolationUnavailable, c.NamespacesError)
	default:
		return "", fmt.Errorf("%w: bubblewrap: %s; namespaces: %s", ErrIsolationUnavailable, c.BwrapError, c.NamespacesError)
	}
}

// runProbe starts l, waits up to 10 s and reports how it failed, stderr included.
func runProbe(l launch) error {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer devnull.Close()
	stderr, err := os.CreateTemp("", "toolserverd-probe-stderr-")
	if err != nil {
		return err
	}
	defer os.Remove(stderr.Name())
	defer stderr.Close()
	var mu sync.Mutex
	reaped := false
	done := make(chan error, 1)
	cmd, err := spawn(l, devnull, devnull, stderr, func(c *exec.Cmd) {
		mu.Lock()
		reaped = true
		mu.Unlock()
		done <- c.Wait()
	})
	if err != nil {
		return err
	}
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		mu.Lock()
		if !reaped {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		mu.Unlock()
		err = errors.Join(errors.New("probe timed out"), <-done)
	}
	if err != nil {
		msg, _ := os.ReadFile(stderr.Name())
		if msg = bytes.TrimSpace(msg); len(msg) > 0 {
			return fmt.Errorf("%w: %s", err, msg)
		}
	}
	return err
}
