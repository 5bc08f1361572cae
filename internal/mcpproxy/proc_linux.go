//go:build linux

package mcpproxy

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// childAttr starts a stdio server as the leader of a session of its own, so of a
// process group of its own (closing the connection kills the group), without the
// daemon's controlling terminal (a daemon started in a terminal would lend it to the
// server, which could push input into the operator's shell with TIOCSTI), and asks
// the kernel to SIGKILL it when its parent dies: a daemon killed with SIGKILL runs no
// cleanup, and a server that ignores stdin EOF would otherwise run on, adopted by
// init.
//
// Pdeathsig concerns the direct child only: grandchildren (npx's node) are left to
// notice stdin EOF.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// pinStartThread: the kernel sends Pdeathsig when the OS thread that forked the
// child exits, not when the process does (golang/go#27505). Go ends a thread when a
// goroutine locked to it returns without unlocking, which any code in the process
// may do; so a stdio child is started from a goroutine locked to its thread, and the
// thread is held until the connection ends (conn.startPinned).
const pinStartThread = true

// childRunning reports whether the child pid runs (stopped included): it is neither
// a zombie nor reaped.
func childRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	end := strings.LastIndexByte(string(b), ')')
	if end < 0 {
		return false
	}
	fields := strings.Fields(string(b[end+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// childExit says how the child pid ended ("exited with status 1", "was killed by
// SIGKILL") while it is a zombie, not yet reaped, or "" (running, or gone): the
// last field of /proc/<pid>/stat is its status as waitpid reports it.
func childExit(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// "1234 (node) Z 1 … 0": the command may hold spaces and parentheses.
	end := strings.LastIndexByte(string(b), ')')
	if end < 0 {
		return ""
	}
	fields := strings.Fields(string(b[end+1:]))
	if len(fields) < 2 || fields[0] != "Z" {
		return ""
	}
	code, err := strconv.Atoi(fields[len(fields)-1])
	if err != nil {
		return ""
	}
	return waitWords(syscall.WaitStatus(code))
}
