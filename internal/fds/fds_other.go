//go:build !linux

package fds

// CloseInheritedOnExec does nothing here: the daemon's commands run on Linux only, and
// elsewhere a stdio MCP server gets what the daemon inherited.
func CloseInheritedOnExec() {}
