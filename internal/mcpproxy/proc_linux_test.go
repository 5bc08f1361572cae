package mcpproxy

import (
	"runtime"
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
