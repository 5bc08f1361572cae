//go:build linux

package mcpproxy

import "syscall"

// childAttr starts a stdio server in its own process group (so that closing the
// connection can kill the group) and asks the kernel to SIGKILL it when its parent
// dies: a daemon killed with SIGKILL runs no cleanup, and a server that ignores
// stdin EOF would otherwise run on, adopted by init.
//
// Pdeathsig concerns the direct child only: grandchildren (npx's node) are left to
// notice stdin EOF.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// pinStartThread: the kernel sends Pdeathsig when the OS thread that forked the
// child exits, not when the process does (golang/go#27505). Go ends a thread when a
// goroutine locked to it returns without unlocking, which any code in the process
// may do; so a stdio child is started from a goroutine locked to its thread, and the
// thread is held until the connection ends (conn.startPinned).
const pinStartThread = true
