package mcpproxy

import (
	"errors"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStdioChildSurvivesThreadExits: a stdio child carries Pdeathsig, which the
// kernel sends when the OS thread that forked it exits. Goroutines that return
// while locked to their thread end it; many of them, after the child started, must
// not take the child with them (the forking thread is held for the connection's life).
func TestStdioChildSurvivesThreadExits(t *testing.T) {
	t.Parallel()
	sc := statefulServer(t, "threads")
	sc.Pooling = PoolShared
	h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{sc}})
	h.start(t)
	h.waitState(t, "threads", StateReady, 30*time.Second)
	pid := h.stdioPid(t, "threads")

	// Each goroutine returns locked to its thread, so the runtime terminates that
	// thread; together they go through the idle threads many times over.
	for range 300 {
		var wg sync.WaitGroup
		for range 4 * runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				runtime.LockOSThread()
				time.Sleep(time.Millisecond)
			})
		}
		wg.Wait()
	}
	time.Sleep(200 * time.Millisecond) // a parent-death signal, if sent, has landed
	if !processAlive(pid) {
		t.Fatalf("the stdio child (pid %d) died when threads of the daemon exited", pid)
	}
	wantText(t, h.call(t.Context(), t, "mcp__threads__count", `{}`, nil), "1")
}

// TestStdioExitReadAfterReap: how a killed stdio child ended is read from its zombie;
// when close reaps it first, what Wait read says it instead of nothing.
func TestStdioExitReadAfterReap(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "echo dying >&2; kill -9 $$")
	cmd.Stderr = io.Discard
	if err := cmd.Run(); err == nil {
		t.Fatal("the child was not killed")
	}
	// Reaped: no zombie left to read, as when close's Wait ran before noteExit.
	c := &conn{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	c.noteWaited()
	c.noteExit()
	close(c.exited)
	err := c.describe(errors.New("transport closed"))
	if !strings.Contains(err.Error(), "the process was killed by SIGKILL") {
		t.Fatalf("describe said %q; want how the reaped child ended", err)
	}
}
