//go:build linux

// Package fds keeps the descriptors the daemon inherited from reaching the processes
// it starts (commands, MCP stdio servers).
package fds

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeRangeCloexec is CLOSE_RANGE_CLOEXEC (linux/close_range.h), absent from x/sys.
const closeRangeCloexec = 1 << 2

// CloseInheritedOnExec marks every descriptor of the process above stderr
// close-on-exec. Those the Go runtime and the standard library open are already;
// this is for the ones inherited from whatever started the daemon (a shell's or a
// supervisor's pipe, a file opened for writing), which would otherwise reach every
// child: bubblewrap and the sandbox's init helper pass on what they get. Call it
// before each start rather than once, so that a descriptor a library opened without
// the flag since is covered too. Descriptors meant for a child are dup'ed onto their
// place in the child (exec.Cmd.ExtraFiles), which clears the flag there, so nothing
// passed on purpose is lost.
func CloseInheritedOnExec() {
	if unix.CloseRange(3, ^uint(0), closeRangeCloexec) == nil {
		return
	}
	// Before Linux 5.11: one by one.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}
