package session

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// lostBatch is a recorder whose first queued insert and first finish are lost with
// their batch (the store refused it: disk full, database away); later writes go
// through to the real group committer.
type lostBatch struct {
	*store.GroupCommitter
	lostInsert, lostFinish atomic.Bool
}

func (r *lostBatch) Enqueue(c *store.Call) error {
	if r.lostInsert.CompareAndSwap(false, true) {
		return nil // the committer does not report a queued insert's failure
	}
	return r.GroupCommitter.Enqueue(c)
}

func (r *lostBatch) Finish(ctx context.Context, f store.CallFinish) error {
	if r.lostFinish.CompareAndSwap(false, true) {
		return errors.New("store: write calls: commit: database or disk is full (13)")
	}
	return r.GroupCommitter.Finish(ctx, f)
}

type readOnlyTool struct{}

func (readOnlyTool) Spec() tool.Spec {
	return tool.Spec{Name: "look", Description: "Looks.", Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true}}
}
func (readOnlyTool) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	return tool.TextResult("what it saw"), nil
}

// TestRefusedResultIsWrittenLater: a read-only call whose queued record and result
// were both lost gets its client's answer at once, and its whole record, finished,
// once the store takes writes again.
func TestRefusedResultIsWrittenLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rec *lostBatch
	e := newExecEnv(t, Config{}, envOpts{tools: []tool.Tool{readOnlyTool{}}, recorder: func(g *store.GroupCommitter) Recorder {
		rec = &lostBatch{GroupCommitter: g}
		return rec
	}})
	t.Cleanup(e.x.Close)
	sess, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"look"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.x.Plan(sess, Batch{Calls: []CallRequest{{ToolCallID: "c1", Name: "look"}}})
	if err != nil {
		t.Fatal(err)
	}
	var res *tool.Result
	e.x.Execute(ctx, p, func(ev Event) {
		if ev.Type == EventMessage {
			res = ev.Result
		}
	})
	if res == nil || res.IsError || res.Text() != "what it saw" {
		t.Fatalf("result %+v, want the tool's", res)
	}
	if !rec.lostInsert.Load() || !rec.lostFinish.Load() {
		t.Fatal("the call's writes did not go through the recorder")
	}
	id := p.Calls[0].ID
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := e.st.GetCall(ctx, id)
		if err == nil && c.Status == store.CallSucceeded && strings.Contains(c.Result.Text(), "what it saw") && c.ToolCallID == "c1" && c.SessionID == sess.ID {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("20s on, the store has %+v, %v; want the call succeeded with its result", c, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
