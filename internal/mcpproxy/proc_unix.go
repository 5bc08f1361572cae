//go:build unix

package mcpproxy

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup puts a stdio server in a process group of its own, so that
// cancelling the connection kills what it started too (npx, shell wrappers). Where
// the OS allows it, the child is also killed when the daemon dies (see childAttr).
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = childAttr()
	cmd.Cancel = func() error {
		killGroup(cmd.Process.Pid)
		return nil
	}
}

// killGroup kills the process group led by pid, if any is left.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
