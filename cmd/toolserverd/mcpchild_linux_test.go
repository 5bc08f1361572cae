package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStdioServerDiesWithDaemon starts the real binary with a stdio MCP server that
// ignores stdin EOF, SIGTERM and SIGHUP and never exits on its own, kills the daemon
// with SIGKILL (no cleanup runs) and checks that the server's process is gone too.
func TestStdioServerDiesWithDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	bin := buildBinary(t)
	dataDir := t.TempDir()
	d := startProc(t, bin, dataDir)
	c := adminClient(t, d.url, dataDir)

	// The child writes its pid and becomes sleep (same pid): it never answers
	// initialize, so the daemon keeps waiting for it (connect_timeout) while it runs.
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	cfg, _ := json.Marshal(map[string]any{
		"name": "stubborn", "transport": "stdio", "command": "sh",
		"args":            []string{"-c", `trap "" TERM HUP; echo $$ > "$0.tmp" && mv "$0.tmp" "$0"; exec sleep 1000`, pidFile},
		"connect_timeout": "10m",
	})
	if _, err := c.AddMCPServer(context.Background(), cfg); err != nil {
		t.Fatalf("add the stdio server: %v", err)
	}
	var pid int
	deadline := time.Now().Add(30 * time.Second)
	for pid == 0 {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the stdio server never started (no pid file)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Whatever happens, leave no sleep behind (it leads its own process group).
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	if !alive(pid) {
		t.Fatalf("the stdio server (pid %d) is not running before the kill", pid)
	}

	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Wait()
	deadline = time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the stdio server (pid %d) still runs 5s after the daemon was killed: %s", pid, procStat(pid))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs; a zombie (killed, not yet reaped by whoever
// adopted it) counts as gone.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st := procStat(pid)
	fields := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func procStat(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ")"
	}
	return string(b)
}
