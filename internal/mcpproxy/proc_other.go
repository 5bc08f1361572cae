//go:build !unix

package mcpproxy

import "os/exec"

// ownProcessGroup is a no-op where process groups do not exist; cancelling kills the
// direct child only.
func ownProcessGroup(*exec.Cmd) {}

func killGroup(int) {}

// pinStartThread: nothing depends on which thread starts a child.
const pinStartThread = false

// childExit is "": how a child ended is read from /proc, on Linux only.
func childExit(int) string { return "" }
