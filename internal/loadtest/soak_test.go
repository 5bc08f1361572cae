package loadtest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestSoak runs mixed traffic for LOADTEST_SOAK (default 45s in CI; the issue asks for
// several minutes: LOADTEST_SOAK=5m) from LOADTEST_SOAK_WORKERS clients, each over a
// fixed session, with no errors, and then checks that the process's goroutines and
// heap return to the baseline taken after a warm-up: within a few goroutines, and
// within 25% + 4 MiB of heap.
func TestSoak(t *testing.T) {
	dur := envDuration(t, "LOADTEST_SOAK", 45*time.Second)
	workers := envInt(t, "LOADTEST_SOAK_WORKERS", 16)
	d := testdaemon.Start(t, nil)
	c, tr := newClient(d.URL, workers)
	// The warm-up's work is fixed (workers × JobRetention+5 batches), so on a loaded
	// machine it takes what it takes; only the soak's own phase is held to its time.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute+dur)
	defer cancel()

	sessions := make([]string, workers)
	for i := range sessions {
		s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: mixedTools, PermissionMode: "bypass"})
		fatalIf(t, err)
		sessions[i] = s.ID
	}
	var batches atomic.Int64
	traffic := func(until time.Time, perWorker int) error {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tag := fmt.Sprintf("w%02d", w)
				for i := 0; (perWorker == 0 || i < perWorker) && (until.IsZero() || time.Now().Before(until)); i++ {
					if err := runChecked(ctx, c, sessions[w], tag); err != nil {
						errs <- fmt.Errorf("worker %d batch %d: %w", w, i, err)
						return
					}
					if _, err := c.Tools(ctx, sessions[w], "openai"); err != nil {
						errs <- err
						return
					}
					batches.Add(1)
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}

	// Warm-up: every path and pool used, and the bounded per-session caches full
	// (each batch starts a job; a session keeps its last JobRetention finished ones),
	// so that what the soak adds is what it must give back.
	warm := time.Now()
	fatalIf(t, traffic(time.Time{}, sandbox.DefaultJobRetention+5))
	baseG, baseH := settle(tr)
	t.Logf("baseline after a warm-up of %s: %d goroutines, HeapInuse %d bytes", time.Since(warm).Round(time.Second), baseG, baseH)

	batches.Store(0)
	start := time.Now()
	fatalIf(t, traffic(start.Add(dur), 0))
	elapsed := time.Since(start)
	n := batches.Load()
	t.Logf("soak: %d batches (%d calls) from %d workers in %s: %.0f calls/s",
		n, n*int64(len(mixedTools)), workers, elapsed.Round(time.Millisecond), float64(n*int64(len(mixedTools)))/elapsed.Seconds())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("at the end of the soak: %d goroutines, HeapInuse %d bytes", runtime.NumGoroutine(), ms.HeapInuse)

	const goroutineSlack = 5
	heapLimit := baseH + baseH/4 + 4<<20
	var g int
	var h uint64
	err := waitFor(60*time.Second, 200*time.Millisecond, func() error {
		g, h = settle(tr)
		if g > baseG+goroutineSlack {
			return fmt.Errorf("%d goroutines, baseline %d", g, baseG)
		}
		if h > heapLimit {
			return fmt.Errorf("HeapInuse %d bytes, baseline %d, limit %d", h, baseH, heapLimit)
		}
		return nil
	})
	t.Logf("after the soak: %d goroutines (baseline %d), HeapInuse %d bytes (baseline %d)", g, baseG, h, baseH)
	if err != nil {
		buf := make([]byte, 1<<20)
		t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		t.Fatalf("did not return to baseline within 60s: %v", err)
	}
}

// settle returns the goroutine count and HeapInuse after GC, with the client's idle
// connections closed.
func settle(tr interface{ CloseIdleConnections() }) (int, uint64) {
	h := heapAfterGC(tr)
	return runtime.NumGoroutine(), h
}
