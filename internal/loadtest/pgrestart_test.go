package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestPostgresRestartUnderLoad runs mixed traffic against a daemon on PostgreSQL,
// stops the server under it and starts it again. While it is down every request ends
// within its deadline, either complete (a stream with done and one message per call,
// errors being is_error results) or with a 5xx JSON error; never a hang, a broken
// stream or a crash. Once it is back, the same daemon serves again and /readyz is
// ready, without a restart.
func TestPostgresRestartUnderLoad(t *testing.T) {
	d := startOnStoppablePostgres(t)
	const workers = 8
	c, tr := newClient(d.URL, workers)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	sessions := make([]string, workers)
	for i := range sessions {
		s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: mixedTools, PermissionMode: "bypass"})
		fatalIf(t, err)
		sessions[i] = s.ID
		fatalIf(t, runChecked(ctx, c, s.ID, fmt.Sprintf("p%d", i)))
	}

	var ok, failedClean atomic.Int64
	var bad sync.Map // worker → first unclean failure
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const reqDeadline = 45 * time.Second
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rctx, rcancel := context.WithTimeout(ctx, reqDeadline)
				clean, err := runTolerant(rctx, c, sessions[w], fmt.Sprintf("p%d", w))
				rcancel()
				switch {
				case err != nil:
					bad.LoadOrStore(w, fmt.Errorf("batch %d: %w", i, err))
					return
				case clean:
					ok.Add(1)
				default:
					failedClean.Add(1)
					time.Sleep(50 * time.Millisecond) // pace retries during the outage
				}
			}
		}()
	}
	fatalIf(t, waitFor(60*time.Second, 20*time.Millisecond, func() error {
		if ok.Load() < workers {
			return errors.New("no traffic yet")
		}
		return nil
	}))

	fatalIf(t, pgtest.StopServer())
	down := time.Now()
	// Wait until the outage is seen by requests and by /readyz.
	sawNotReady := false
	fatalIf(t, waitFor(60*time.Second, 50*time.Millisecond, func() error {
		if readyStatus(ctx, d.URL) == http.StatusServiceUnavailable {
			sawNotReady = true
		}
		if failedClean.Load() == 0 || !sawNotReady {
			return fmt.Errorf("%d clean failures, /readyz not ready seen: %v", failedClean.Load(), sawNotReady)
		}
		return nil
	}))
	t.Logf("outage seen %s after the stop: %d clean failures so far", time.Since(down).Round(time.Millisecond), failedClean.Load())

	fatalIf(t, pgtest.StartServer())
	up := time.Now()
	okAtStart := ok.Load()
	fatalIf(t, waitFor(90*time.Second, 100*time.Millisecond, func() error {
		if readyStatus(ctx, d.URL) != http.StatusOK {
			return errors.New("/readyz not ready")
		}
		if ok.Load() < okAtStart+workers {
			return errors.New("traffic has not recovered")
		}
		return nil
	}))
	t.Logf("recovered %s after PostgreSQL came back (ready, %d batches since)", time.Since(up).Round(time.Millisecond), ok.Load()-okAtStart)
	close(stop)
	wg.Wait()
	bad.Range(func(k, v any) bool { t.Errorf("worker %v: %v", k, v); return true })
	// A new session, after recovery, works end to end.
	s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: mixedTools, PermissionMode: "bypass"})
	fatalIf(t, err)
	fatalIf(t, runChecked(ctx, c, s.ID, "post"))
	t.Logf("%d complete batches, %d cleanly failed requests", ok.Load(), failedClean.Load())
}

// runTolerant runs a batch and classifies the outcome: clean is true when every call
// succeeded; false with a nil error when the request failed cleanly (5xx JSON error,
// or a complete stream holding is_error results). Anything else is an error.
func runTolerant(ctx context.Context, c *client.Client, sessionID, tag string) (clean bool, err error) {
	calls := mixedCalls(tag)
	msgs, errs, done := 0, 0, false
	err = c.Run(ctx, sessionID, "", client.Batch{Calls: calls, Strategy: "sequential"}, func(ev client.Event) error {
		switch ev.Type {
		case "message":
			msgs++
			var m struct {
				IsError bool   `json:"is_error"`
				Content string `json:"content"`
			}
			if err := json.Unmarshal(ev.Message, &m); err != nil {
				return err
			}
			if m.IsError {
				if m.Content == "" {
					return errors.New("an is_error result without text")
				}
				errs++
			}
		case "done":
			done = true
		}
		return nil
	})
	if err != nil {
		var ae *client.Error
		if errors.As(err, &ae) && ae.Status >= 500 && ae.Code != "http" && ae.Message != "" {
			return false, nil
		}
		return false, err
	}
	if !done || msgs != len(calls) {
		return false, fmt.Errorf("stream: done=%v, %d messages for %d calls", done, msgs, len(calls))
	}
	return errs == 0, nil
}

func readyStatus(ctx context.Context, base string) int {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, base+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
