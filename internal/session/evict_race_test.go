package session

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// unsafeBlock is NOT concurrency-safe: the session's serial lock must admit one at a time.
type unsafeBlock struct {
	running *atomic.Int32
	maxSeen *atomic.Int32
	started chan struct{}
	release chan struct{}
}

func (u unsafeBlock) Spec() tool.Spec {
	return tool.Spec{Name: "ublock", Description: "Blocks, unsafe."}
}

func (u unsafeBlock) Run(ctx *tool.Context, _ json.RawMessage) (*tool.Result, error) {
	n := u.running.Add(1)
	defer u.running.Add(-1)
	for {
		m := u.maxSeen.Load()
		if n <= m || u.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	u.started <- struct{}{}
	select {
	case <-u.release:
	case <-ctx.Done():
	}
	return tool.TextResult("ok"), nil
}

// TestEvictionSparesSessionJustGot: a request holds its session only once its batch
// starts. Were the session evicted (MaxLive) between Get and then, a second request
// would load another copy, and two unsafe calls of one session would run at once
// under two serial locks. A session used that recently is not evicted.
func TestEvictionSparesSessionJustGot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := unsafeBlock{running: new(atomic.Int32), maxSeen: new(atomic.Int32), started: make(chan struct{}, 2), release: make(chan struct{})}
	e := newExecEnv(t, Config{MaxLive: 1}, envOpts{tools: []tool.Tool{u}})
	m, x := e.m, e.x

	busy, _, err := m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.hold()() // a session with a running call: not evictable
	b, _, err := m.Create(ctx, "t1", Spec{AvailableTools: []string{"ublock"}})
	if err != nil {
		t.Fatal(err)
	}

	// Request 1: the handler gets the session ...
	s1, err := m.Get(ctx, "t1", b.ID)
	if err != nil {
		t.Fatal(err)
	}
	// ... the sweeper (kicked by MaxLive) runs before Execute holds it ...
	if n, err := m.Sweep(ctx, time.Now()); n != 0 || err != nil {
		t.Fatalf("sweep evicted %d (%v), want none: the session was just got", n, err)
	}
	// ... request 2 for the same session loads it again.
	s2, err := m.Get(ctx, "t1", b.ID)
	if err != nil {
		t.Fatal(err)
	}
	run := func(s *Session, id string) chan *tool.Result {
		done := make(chan *tool.Result, 1)
		p, err := x.Plan(s, Batch{Calls: []CallRequest{{ToolCallID: id, Name: "ublock"}}})
		if err != nil {
			t.Fatal(err)
		}
		go x.Execute(ctx, p, func(ev Event) {
			if ev.Type == EventMessage {
				done <- ev.Result
			}
		})
		return done
	}
	d1 := run(s1, "c1")
	<-u.started
	d2 := run(s2, "c2")
	select {
	case <-u.started:
	case <-time.After(500 * time.Millisecond):
	}
	close(u.release)
	<-d1
	<-d2
	if s1 != s2 {
		t.Errorf("two live objects for session %s (%p, %p)", b.ID, s1, s2)
	}
	if got := u.maxSeen.Load(); got > 1 {
		t.Errorf("%d calls of a tool that is not concurrency-safe ran at once in one session", got)
	}
}
