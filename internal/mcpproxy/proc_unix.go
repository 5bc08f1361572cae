//go:build unix

package mcpproxy

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
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

// processEnd says how a reaped child ended, from what Wait read.
func processEnd(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return waitWords(ws)
	}
	return ""
}

// waitWords puts a wait status in words: "exited with status 1", "was killed by SIGKILL".
func waitWords(ws syscall.WaitStatus) string {
	switch {
	case ws.Exited():
		return "exited with status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		return "was killed by " + unix.SignalName(ws.Signal())
	}
	return ""
}
