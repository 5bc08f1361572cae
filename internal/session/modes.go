package session

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// The execution modes beyond direct: background calls answer with a handle and
// publish their result to the session later; stateful calls yield intermediate
// results and wait for the agent's answers.

// ErrNotWaiting is returned by ProvideInput for a call that is not waiting for input.
var ErrNotWaiting = errors.New("the call is not waiting for input")

// runBackground answers a background tool's call at once with a handle; the tool runs
// on, detached from the request, and its result is recorded and published to the
// session (any open stream of it gets a tool_result event).
func (x *Executor) runBackground(ctx context.Context, sess *Session, c *Call, seq uint64, startedAtInsert bool, start time.Time, emit func(Event)) {
	handle, _ := tool.JSONResult(map[string]string{
		"status": "running", "call_id": c.ID, "mode": "background",
		"note": "the result arrives later as a tool_result event on the session's streams and at GET /v1/tool-calls/" + c.ID,
	})
	// Detached from the request, it stays cancellable by Cancel.
	bctx, untrack := x.track(context.WithoutCancel(ctx), c.ID)
	if cancelledByRequest(ctx) { // Cancel reached the request's context just before
		x.Cancel(c.ID)
	}
	x.wg.Add(1)
	release := sess.hold() // the session stays in memory until the call's result is published
	go func() {
		defer x.wg.Done()
		defer release()
		defer untrack()
		// Its approval request, if it needs one, goes to the session's streams, here
		// and on the other replicas (background.go).
		publish := func(ev Event) {
			sess.publish(ev)
			if ev.Type == EventApproval && ev.Approval != nil {
				sess.manager.announceBackgroundApproval(bctx, sess, ev.Approval.ID)
			}
		}
		res, started := x.execute(bctx, sess, c, seq, startedAtInsert, publish)
		msg, _ := x.finish(bctx, sess, c, res, start, started, true)
		sess.publish(Event{Type: EventResult, Call: c, Result: msg, TS: time.Now()})
		// The session's streams on other replicas (background.go).
		sess.manager.announceBackground(bctx, sess, c.ID)
	}()
	emit(Event{Type: EventMessage, Call: c, Result: handle, TS: time.Now()})
}

// ProvideInput hands the agent's answer to a stateful call waiting for it.
func (x *Executor) ProvideInput(callID string, input json.RawMessage) error {
	x.mu.Lock()
	ch, ok := x.inputs[callID]
	if ok {
		delete(x.inputs, callID)
	}
	x.mu.Unlock()
	if !ok {
		return ErrNotWaiting
	}
	ch <- input // buffered, and only one answer per question is taken
	return nil
}

// interactor serves tool.Context.Ask for one stateful call.
type interactor struct {
	x    *Executor
	c    *Call
	emit func(Event)
}

func (in interactor) Ask(ctx context.Context, y *tool.Result) (json.RawMessage, error) {
	if y == nil {
		y = tool.TextResult("")
	}
	ch := make(chan json.RawMessage, 1)
	in.x.mu.Lock()
	if _, busy := in.x.inputs[in.c.ID]; busy {
		in.x.mu.Unlock()
		return nil, tool.Errorf(tool.KindFailed, "%s is already waiting for input", in.c.Name)
	}
	in.x.inputs[in.c.ID] = ch
	in.x.mu.Unlock()
	defer func() {
		in.x.mu.Lock()
		if in.x.inputs[in.c.ID] == ch {
			delete(in.x.inputs, in.c.ID)
		}
		in.x.mu.Unlock()
	}()
	msg := y
	if in.x.trunc != nil {
		msg = in.x.trunc.Apply(y)
	}
	in.emit(Event{Type: EventYield, Call: in.c, Result: msg, TS: time.Now()})
	select {
	case answer := <-ch:
		return answer, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
