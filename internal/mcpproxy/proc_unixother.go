//go:build unix && !linux

package mcpproxy

import "syscall"

// childAttr starts a stdio server in a session (and process group) of its own, without
// the daemon's terminal. There is no parent-death
// signal here: a daemon killed with SIGKILL leaves a server that ignores stdin EOF
// running.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// pinStartThread: nothing depends on which thread starts a child.
const pinStartThread = false

// childRunning is false: whether a child runs is read from /proc, on Linux only.
func childRunning(int) bool { return false }

// childExit is "": how a child ended is read from /proc, on Linux only.
func childExit(int) string { return "" }
