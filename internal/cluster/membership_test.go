package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// stallingStore answers every heartbeat at once but the third, which takes stall
// (ignoring its deadline), as a process that was stopped mid-heartbeat does.
type stallingStore struct {
	stall time.Duration
	n     atomic.Int32
}

func (s *stallingStore) Heartbeat(ctx context.Context, id, address string, startedAt time.Time) error {
	if s.n.Add(1) == 3 {
		time.Sleep(s.stall)
	}
	return nil
}

func (s *stallingStore) ExpireReplicas(ctx context.Context, self string, lease time.Duration, result func(owner string, started bool) *tool.Result) ([]store.ExpiredCall, error) {
	return nil, nil
}

func (s *stallingStore) LeaveReplica(ctx context.Context, id string) error { return nil }

// TestFenceAfterStall: a replica that sent no heartbeat for longer than its lease,
// though none failed (the process was stopped, then continued), has had its calls
// failed by the others: it cancels the calls it runs, as when its heartbeats fail.
// A replica whose heartbeats come on time is never fenced.
func TestFenceAfterStall(t *testing.T) {
	t.Parallel()
	// The on-time replica has a lease far above its interval: a loaded machine
	// delaying one heartbeat past a short lease would be a real (and right) fence.
	for _, tc := range []struct {
		name  string
		lease time.Duration
		stall time.Duration
		fence bool
	}{
		{"stalled past the lease", 200 * time.Millisecond, 400 * time.Millisecond, true},
		{"on time", 30 * time.Second, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			fenced := 0
			st := &stallingStore{stall: tc.stall}
			m, err := New(Config{ReplicaID: "r", Lease: tc.lease, Interval: 50 * time.Millisecond, Fence: func() int {
				mu.Lock()
				defer mu.Unlock()
				fenced++
				return 1
			}}, st, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			// Wait for what must happen rather than a fixed time: the fence after
			// the stall, or (on time) ten heartbeats, the stall's third among them.
			done := func() bool {
				mu.Lock()
				defer mu.Unlock()
				if tc.fence {
					return fenced > 0
				}
				return st.n.Load() >= 10
			}
			for deadline := time.Now().Add(30 * time.Second); !done(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					break
				}
			}
			m.Stop()
			mu.Lock()
			defer mu.Unlock()
			if got := fenced > 0; got != tc.fence {
				t.Fatalf("fenced %d times after %d heartbeats; want fenced: %v", fenced, st.n.Load(), tc.fence)
			}
			if !tc.fence && st.n.Load() < 10 {
				t.Fatalf("only %d heartbeats in 30s", st.n.Load())
			}
		})
	}
}

// blippingStore fails heartbeats 2 to 4 at once (the database away for a moment, a
// connection refused) and answers the others.
type blippingStore struct{ n atomic.Int32 }

func (s *blippingStore) Heartbeat(ctx context.Context, id, address string, startedAt time.Time) error {
	if n := s.n.Add(1); n >= 2 && n <= 4 {
		return errors.New("connection refused")
	}
	return nil
}

func (s *blippingStore) ExpireReplicas(ctx context.Context, self string, lease time.Duration, result func(owner string, started bool) *tool.Result) ([]store.ExpiredCall, error) {
	return nil, nil
}

func (s *blippingStore) LeaveReplica(ctx context.Context, id string) error { return nil }

// syncBuffer is a log sink safe for the loop's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestFenceAfterFailedHeartbeatsSaysSo: heartbeats fail for a moment (the database
// away), each failure still within the lease, and the next one that succeeds comes
// after the lease: the replica fences itself (the others may have failed its calls),
// and its log must say that its heartbeats failed, not that the process was stopped
// or starved, which sends an operator looking at the wrong thing.
func TestFenceAfterFailedHeartbeatsSaysSo(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	var fenced atomic.Int32
	m, err := New(Config{ReplicaID: "r", Lease: 190 * time.Millisecond, Interval: 50 * time.Millisecond, Fence: func() int {
		fenced.Add(1)
		return 1
	}}, &blippingStore{}, nil, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for fenced.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	m.Stop()
	out := log.String()
	if fenced.Load() == 0 {
		t.Fatalf("not fenced after its heartbeats failed past the lease; log:\n%s", out)
	}
	if strings.Contains(out, "stopped or starved") || !strings.Contains(out, "FENCED: this replica has not heartbeated") {
		t.Fatalf("the log of a replica whose heartbeats failed:\n%s\nwant the FENCED line saying its heartbeats failed", out)
	}
}
