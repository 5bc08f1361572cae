package session

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// sideEffect is a tool that changes something and does not look at its context
// (like a write).
type sideEffect struct{ ran *atomic.Int32 }

func (s sideEffect) Spec() tool.Spec { return tool.Spec{Name: "write_thing", Description: "Writes."} }
func (s sideEffect) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	s.ran.Add(1)
	return tool.TextResult("written"), nil
}

// cancelDuringStart is the real committer, but a Cancel arrives while the call's
// MarkRunning is being committed: the call was recorded pending, and Cancel accepted it.
type cancelDuringStart struct {
	*store.GroupCommitter
	x        *Executor
	accepted atomic.Bool
}

func (r *cancelDuringStart) MarkRunning(ctx context.Context, id, owner string, at time.Time) error {
	rec, _ := r.GroupCommitter.GetCall(ctx, id)
	if rec != nil && rec.Status == store.CallPending && r.x.Cancel(id) {
		r.accepted.Store(true)
	}
	return r.GroupCommitter.MarkRunning(ctx, id, owner, at)
}

// TestCancelDuringStartWrite: a Cancel that arrives while a pending call's start is
// being written (MarkRunning, a commit) is accepted, so the tool must not run.
func TestCancelDuringStartWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ran := new(atomic.Int32)
	var rec *cancelDuringStart
	e := newExecEnv(t, Config{}, envOpts{tools: []tool.Tool{sideEffect{ran}}, recorder: func(g *store.GroupCommitter) Recorder {
		rec = &cancelDuringStart{GroupCommitter: g}
		return rec
	}})
	m, x := e.m, e.x
	rec.x = x
	sess, _, err := m.Create(ctx, "t1", Spec{AvailableTools: []string{"write_thing"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := x.Plan(sess, Batch{Calls: []CallRequest{{ToolCallID: "c1", Name: "write_thing"}}})
	if err != nil {
		t.Fatal(err)
	}
	var res *tool.Result
	x.Execute(ctx, p, func(ev Event) {
		if ev.Type == EventMessage {
			res = ev.Result
		}
	})
	if !rec.accepted.Load() {
		t.Fatal("Cancel was not accepted")
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("Cancel was accepted while the call's record said pending, yet the tool ran %d time(s); result %+v", n, res)
	}
	if res == nil || res.ErrorKind != tool.KindCancelled || !strings.Contains(res.Text(), "cancelled by request before it ran") {
		t.Errorf("result %+v, want cancelled by request before it ran", res)
	}
}
