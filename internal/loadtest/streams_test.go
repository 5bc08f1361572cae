package loadtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestConcurrentStreams opens LOADTEST_STREAMS (default 1,000, the figure)
// NDJSON streams at once, each a sequential batch of six mixed tools in its own
// session, and requires zero errors: no HTTP error, every stream ends with done, every
// call has exactly one message and none is an error.
func TestConcurrentStreams(t *testing.T) {
	n := envInt(t, "LOADTEST_STREAMS", 1000)
	d := testdaemon.Start(t, func(c *config.Config) {})
	c, tr := newClient(d.URL, n)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// Sessions first, so that the measured phase is the streams.
	sessions := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: mixedTools, PermissionMode: "bypass"})
			if err != nil {
				errs <- fmt.Errorf("session %d: %w", i, err)
				return
			}
			sessions[i] = s.ID
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// All streams start together: each goroutine waits on the gate.
	gate := make(chan struct{})
	errs = make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			if err := runChecked(ctx, c, sessions[i], fmt.Sprintf("s%04d", i)); err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
			}
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	failed := 0
	for err := range errs {
		failed++
		if failed <= 10 {
			t.Error(err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d streams failed", failed, n)
	}
	t.Logf("%d concurrent streams × %d calls in %s: %.0f streams/s, %.0f calls/s",
		n, len(mixedTools), elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), float64(n*len(mixedTools))/elapsed.Seconds())
}
