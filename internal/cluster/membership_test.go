package cluster

import (
	"context"
	"io"
	"log/slog"
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
	for _, tc := range []struct {
		name  string
		stall time.Duration
		fence bool
	}{
		{"stalled past the lease", 400 * time.Millisecond, true},
		{"on time", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			fenced := 0
			m, err := New(Config{ReplicaID: "r", Lease: 200 * time.Millisecond, Interval: 50 * time.Millisecond, Fence: func() int {
				mu.Lock()
				defer mu.Unlock()
				fenced++
				return 1
			}}, &stallingStore{stall: tc.stall}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(tc.stall + 300*time.Millisecond)
			m.Stop()
			mu.Lock()
			defer mu.Unlock()
			if got := fenced > 0; got != tc.fence {
				t.Fatalf("fenced %d times; want fenced: %v", fenced, tc.fence)
			}
		})
	}
}
