package session

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// Cancellation: every call of this process can be cancelled from before its record is
// written until its result is. A call whose tool runs is stopped; one still waiting to
// start — for its turn in the batch, the session's lock, a decision or an answer —
// ends as cancelled without running.

// errCancelRequested is the cause of a call's context when Cancel ended it.
var errCancelRequested = errors.New("cancelled by request")

// ErrShuttingDown is the cause the daemon cancels its calls with when it stops, so
// that their results say so instead of blaming the client.
var ErrShuttingDown = errors.New("the server is shutting down")

// whoLeft names what ended the wait of a call whose ctx is done: the server stopping,
// or the client going away.
func whoLeft(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), ErrShuttingDown) {
		return "the server shut down"
	}
	return "the client went away"
}

// callCancel ends one unfinished call; a pointer, so that only its own tracker
// removes it.
type callCancel struct {
	cancel context.CancelCauseFunc
	// durable is set (under Executor.mu) while the call waits for a decision or an
	// answer that the store keeps: ReleaseWaiting ends such a wait at shutdown.
	durable bool
	// over is closed when the tracker that made it is done (see Running).
	over chan struct{}
}

// track makes a call cancellable by Cancel until untrack is called. A call that is
// tracked again (a background call detaching from its request) is then cancelled
// through its newest context.
func (x *Executor) track(ctx context.Context, callID string) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	cc := &callCancel{cancel: cancel, over: make(chan struct{})}
	x.mu.Lock()
	x.unfinished[callID] = cc
	x.mu.Unlock()
	return cctx, func() {
		x.mu.Lock()
		if x.unfinished[callID] == cc {
			delete(x.unfinished, callID)
		}
		x.mu.Unlock()
		cancel(nil)
		close(cc.over)
	}
}

// Running returns a channel closed when this process's call callID is no longer
// where Running found it (its result is recorded, or it went on in the background),
// or nil when the call is not one of this process's unfinished calls. A caller
// following the call reads its record again when the channel closes.
func (x *Executor) Running(callID string) <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if cc, ok := x.unfinished[callID]; ok {
		return cc.over
	}
	return nil
}

// Unfinished returns the ids of this process's unfinished calls, sorted.
func (x *Executor) Unfinished() []string {
	x.mu.Lock()
	ids := make([]string, 0, len(x.unfinished))
	for id := range x.unfinished {
		ids = append(ids, id)
	}
	x.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// cancelledByRequest reports whether Cancel ended the call of ctx.
func cancelledByRequest(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errCancelRequested)
}

// notStarted is the result of a call whose context ended before its tool was invoked.
func notStarted(ctx context.Context, c *Call) *tool.Result {
	if cancelledByRequest(ctx) {
		return tool.ErrorResult(tool.KindCancelled, "%s was cancelled by request before it ran", c.Name)
	}
	return tool.ErrorResult(tool.KindCancelled, "%s was cancelled before it ran", c.Name)
}

// Cancel cancels a call of this process that has not finished: a running tool is
// stopped, and a call still waiting to start (its turn in the batch, the session's
// lock, a decision) ends without running. It reports whether the call was here.
func (x *Executor) Cancel(callID string) bool {
	x.mu.Lock()
	cc, ok := x.unfinished[callID]
	x.mu.Unlock()
	if ok {
		cc.cancel(errCancelRequested)
	}
	return ok
}

// errFenced is the cause CancelAll cancels calls with.
var errFenced = errors.New("this replica lost its lease")

// CancelAll cancels every unfinished call of this process and returns how many it
// cancelled. A replica that lost its lease uses it: the others fail its calls.
func (x *Executor) CancelAll() int {
	x.mu.Lock()
	cancels := make([]*callCancel, 0, len(x.unfinished))
	for _, c := range x.unfinished {
		cancels = append(cancels, c)
	}
	x.mu.Unlock()
	for _, c := range cancels {
		c.cancel(errFenced)
	}
	return len(cancels)
}

// cancelWaiting ends a call that Cancel reached while it waited for a decision: its
// request is withdrawn, so that an approval given afterwards cannot run it, and the
// call is finished as cancelled. (A client that goes away leaves the request pending
// instead: someone may still want the call run.) It returns as permit does.
func (x *Executor) cancelWaiting(ctx context.Context, c *Call, approvalID string) (run, claimed bool, res *tool.Result, err error) {
	res = notStarted(ctx, c)
	a, err := x.withdraw(ctx, approvalID, "the call was cancelled by request before a decision", res)
	switch {
	case err == nil: // the store finished the call with res
		return false, false, res, errFinishedElsewhere
	case errors.Is(err, store.ErrConflict) && a != nil && a.Status == store.ApprovalApproved:
		// Approved just before: claim the call, so that nobody else runs it, and
		// finish it as cancelled without running it.
		cerr := x.perm.Store.ClaimCall(context.WithoutCancel(ctx), c.ID, x.cfg.Owner, time.Now().UTC())
		if cerr == nil {
			return false, true, res, nil
		}
		if errors.Is(cerr, store.ErrConflict) {
			return false, false, tool.ErrorResult(tool.KindUnavailable, "%s was approved and started elsewhere before the cancel reached it; its result will be on its record", c.Name), errFinishedElsewhere
		}
		err = cerr
	case errors.Is(err, store.ErrConflict) && a != nil: // denied or expired: the store finished the call
		wctx, cancel := x.recordCtx(ctx)
		defer cancel()
		if r, werr := x.awaitResult(wctx, c.ID); errors.Is(werr, errFinishedElsewhere) {
			return false, false, r, werr
		}
	}
	x.log.ErrorContext(ctx, "withdrawing the approval request of a cancelled call failed", "call_id", c.ID, "approval_id", approvalID, "err", err)
	return false, false, tool.ErrorResult(tool.KindCancelled, "%s was cancelled by request while it waited for approval, but the request could not be withdrawn; it stays pending and the call runs if it is approved", c.Name), errFinishedElsewhere
}

// cancelExternal ends a call that Cancel reached while it waited for its answer: it
// is finished as cancelled, so a later answer is refused. An answer recorded first
// wins (a finish never replaces a final state) and is the result.
func (x *Executor) cancelExternal(ctx context.Context, c *Call) *tool.Result {
	c.settled = true
	res := notStarted(ctx, c)
	wctx, cancel := x.recordCtx(ctx)
	defer cancel()
	// ErrAlreadyFinal: the answer came first; the record has it.
	if err := x.rec.Finish(wctx, store.CallFinish{ID: c.ID, Status: store.CallFailed, Result: res, FinishedAt: time.Now().UTC()}); err != nil && !errors.Is(err, store.ErrAlreadyFinal) {
		x.log.ErrorContext(ctx, "recording call result failed", "call_id", c.ID, "err", err)
		return res
	}
	if rec, err := x.perm.Store.GetCall(wctx, c.ID); err == nil && rec.Result != nil {
		return rec.Result
	}
	return res
}

// waitingDurably marks the call callID as waiting for something the store keeps (a
// decision, an external answer) until done is called: the daemon need not keep it
// while it stops, since whoever decides or answers later gets it run or finished.
// Once ReleaseWaiting was called, the wait is ended at once.
func (x *Executor) waitingDurably(callID string) (done func()) {
	x.mu.Lock()
	defer x.mu.Unlock()
	cc, ok := x.unfinished[callID]
	if !ok {
		return func() {}
	}
	if x.releasing {
		cc.cancel(ErrShuttingDown)
		return func() {}
	}
	cc.durable = true
	return func() {
		x.mu.Lock()
		cc.durable = false
		x.mu.Unlock()
	}
}

// Released returns a channel closed once ReleaseWaiting was called: the daemon stops,
// and whoever waits for a call that is not this process's to run (a stream following
// a call that waits for a decision, or that another replica runs) should leave now
// rather than hold the drain.
func (x *Executor) Released() <-chan struct{} { return x.released }

// ReleaseWaiting ends, as the server shutting down, the waits of the calls that wait
// for a decision or an external answer, now and from now on: their requests stay
// pending in the store (the call runs, or takes its answer, when it comes), so a drain
// need not wait for a person. It returns how many waits it ended.
func (x *Executor) ReleaseWaiting() int {
	x.mu.Lock()
	if !x.releasing {
		close(x.released)
	}
	x.releasing = true
	var cancels []*callCancel
	for _, cc := range x.unfinished {
		if cc.durable {
			cancels = append(cancels, cc)
		}
	}
	x.mu.Unlock()
	for _, cc := range cancels {
		cc.cancel(ErrShuttingDown)
	}
	return len(cancels)
}
