package chain_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// These tests measure the process's heap (the daemon runs in the test process), so they
// are not parallel: they run before the parallel tests start.

const testMemoryLimit = 32 << 20

func heapMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// watchHeapPeak samples the heap's objects (live and not yet swept) until the returned
// function is called, which returns the highest growth over the heap at the start.
func watchHeapPeak(t *testing.T) func() int64 {
	t.Helper()
	runtime.GC()
	const name = "/memory/classes/heap/objects:bytes"
	base := heapMetric(name)
	var peak atomic.Uint64
	peak.Store(base)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if v := heapMetric(name); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		return int64(peak.Load()) - int64(base)
	}
}

// TestChainMemoryDoubling: a script doubling a list (each `x + x` one step) is stopped
// soon after what it keeps passes chain.max_memory_bytes, at the daemon's GOGC=400 and
// with the daemon's own live heap (sessions, caches; here a ballast) putting the next
// collection hundreds of MiB away: the heap never grows far past the limit.
func TestChainMemoryDoubling(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	ballast := make([]byte, 48<<20)
	defer runtime.KeepAlive(ballast)
	e := start(t, func(c *config.Config) { c.Chain.MaxMemoryBytes = testMemoryLimit })
	sess := e.session("tool_chain", "t_*")
	for _, tc := range []struct{ name, script string }{
		// At most 2^24 elements (256 MiB): the test stays light even when the guard fails.
		{"list", "x = [1]\nfor i in range(24):\n    x = x + x\nresult = len(x)\n"},
		{"string", "s = 'ab'\nfor i in range(27):\n    s = s + s\nresult = len(s)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peak := watchHeapPeak(t)
			r := e.chain(sess, tc.script)
			grown := peak()
			t.Logf("heap grew by %d MiB at most; answer %+v", grown>>20, r.Out.Error)
			wantError(t, r, "failed", "chain.max_memory_bytes")
			// One step may double what the script keeps: the limit, once, and its double.
			if grown > 6*testMemoryLimit {
				t.Errorf("the heap grew by %d MiB before the script was stopped, limit %d MiB", grown>>20, testMemoryLimit>>20)
			}
		})
	}
}

// TestChainMemoryUnrelatedGarbage: a modest script is not stopped because the rest of
// the daemon allocates many times its limit meanwhile (the heap is the process's).
func TestChainMemoryUnrelatedGarbage(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	e := start(t, func(c *config.Config) {
		c.Chain.MaxMemoryBytes = testMemoryLimit
		c.Chain.MaxSteps = 5_000_000
	})
	sess := e.session("tool_chain", "t_*")

	// Another session's work: 4 MiB of garbage every millisecond (up to 1 GiB) while the
	// script runs.
	done := make(chan struct{})
	var wg sync.WaitGroup
	var allocated atomic.Int64
	wg.Go(func() {
		for allocated.Load() < 1<<30 {
			b := make([]byte, 4<<20)
			b[len(b)-1] = 1
			runtime.KeepAlive(b)
			allocated.Add(int64(len(b)))
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	// About 3 MiB kept, in small steps, for a few hundred milliseconds.
	r := e.chain(sess, "d = {}\nfor i in range(300000):\n    d[i % 20000] = 'v%d' % i\nresult = len(d)\n")
	close(done)
	wg.Wait()
	if r.IsError {
		t.Fatalf("a modest script was stopped: %+v", r.Out.Error)
	}
	if got := allocated.Load(); got < 4*testMemoryLimit {
		t.Fatalf("the other work allocated only %d MiB while the script ran: the test shows nothing", got>>20)
	}
	t.Logf("the other work allocated %d MiB while the script ran", allocated.Load()>>20)
}

// TestChainRangeBound: list(range(1 << 40)) asks for 16 TiB in one step, which no check
// between steps can stop and the Go runtime answers by ending the process; the chain's
// range refuses it, and the daemon lives on.
func TestChainRangeBound(t *testing.T) {
	e := start(t, func(c *config.Config) { c.Chain.MaxMemoryBytes = testMemoryLimit })
	sess := e.session("tool_chain", "t_*")
	r := e.chain(sess, "x = list(range(1 << 40))\n")
	wantError(t, r, "failed", fmt.Sprintf("a range of %d elements is more than a chain may make", 1<<40))
	// A range within the bound is Starlark's own.
	r = e.chain(sess, "result = [len(range(1000)), list(range(2, 10, 3)), 5 in range(10), range(3)[-1]]\n")
	if r.IsError || strings.TrimSpace(string(r.Out.Result)) != "[1000,[2,5,8],true,2]" {
		t.Fatalf("a small range: %+v %s", r.Out.Error, r.Out.Result)
	}
}
