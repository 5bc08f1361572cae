//go:build !unix

package mcpproxy

import (
	"os"
	"os/exec"
	"strconv"
)

// ownProcessGroup is a no-op where process groups do not exist; cancelling kills the
// direct child only.
func ownProcessGroup(*exec.Cmd) {}

func killGroup(int) {}

// pinStartThread: nothing depends on which thread starts a child.
const pinStartThread = false

// childRunning is false: whether a child runs is read from /proc, on Linux only.
func childRunning(int) bool { return false }

// childExit is "": how a child ended is read from /proc, on Linux only.
func childExit(int) string { return "" }

// processEnd says how a reaped child ended, from what Wait read.
func processEnd(ps *os.ProcessState) string {
	if code := ps.ExitCode(); code >= 0 {
		return "exited with status " + strconv.Itoa(code)
	}
	return ""
}
