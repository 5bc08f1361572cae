package session

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// heldProgress is the progress of a call whose output goes on after its result (a
// background job's): it ends when ended is closed.
type heldProgress struct{ ended chan struct{} }

func (heldProgress) Emit(string, string) {}
func (heldProgress) Close()              {}
func (heldProgress) Held() bool          { return true }
func (p heldProgress) WhenEnded(fn func()) {
	go func() { <-p.ended; fn() }()
}

type heldSource struct{ p heldProgress }

func (s heldSource) Begin(string, string, string) tool.Progress { return s.p }

// refusedClose is a recorder whose first clears of an open-output mark are refused
// (the database away when the job ended); the rest reach the real store.
type refusedClose struct {
	*store.GroupCommitter
	refuse atomic.Int32
	tries  atomic.Int32
}

func (r *refusedClose) CloseCallOutput(ctx context.Context, id string) error {
	r.tries.Add(1)
	if r.refuse.Add(-1) >= 0 {
		return errors.New(`store: close the output of call: failed to connect to "user=postgres database=toolserverd": dial tcp 127.0.0.1:5432: connect: connection refused`)
	}
	return r.GroupCommitter.CloseCallOutput(ctx, id)
}

// TestOutputMarkClearedAfterRefusal: a call's output (a background job's) ends while
// the store refuses writes. Its record's output_open mark is cleared once the store
// takes writes again, without a restart; before, it said the output was open (and
// GET /v1/tool-calls?live=true listed the call) until the daemon restarted.
func TestOutputMarkClearedAfterRefusal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rec *refusedClose
	e := newExecEnv(t, Config{}, envOpts{tools: []tool.Tool{readOnlyTool{}}})
	rec = &refusedClose{GroupCommitter: e.commits}
	rec.refuse.Store(2)
	src := heldSource{heldProgress{ended: make(chan struct{})}}
	e.x = NewExecutor(ExecConfig{Owner: "test"}, rec, nil, nil, src, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(e.x.Close)
	sess, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"look"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.x.Plan(sess, Batch{Calls: []CallRequest{{ToolCallID: "c1", Name: "look"}}})
	if err != nil {
		t.Fatal(err)
	}
	e.x.Execute(ctx, p, func(Event) {})
	id := p.Calls[0].ID
	if c, err := e.st.GetCall(ctx, id); err != nil || c.Status != store.CallSucceeded || !c.OutputOpen {
		t.Fatalf("after the call: %+v, %v; want succeeded with its output open", c, err)
	}
	close(src.p.ended)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := e.st.GetCall(ctx, id)
		if err == nil && !c.OutputOpen {
			if n := rec.tries.Load(); n != 3 {
				t.Errorf("%d clears tried, want 3 (two refused, one taken)", n)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("15s after the output ended the record still says it is open (%d clears tried): %+v, %v", rec.tries.Load(), c, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
