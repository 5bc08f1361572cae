package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/toolserverd/toolserverd/internal/progress"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// Resuming a batch. A backend whose connection dropped mid-batch (a proxy timeout, a
// redeploy, a retrying HTTP client) sends the same batch again with "resume": true.
// Calls the session already has on record under the same tool_call_id are not run a
// second time: the response follows each such record until it has its result and
// sends that, marked resumed. Calls not on record run as usual, after the followed
// ones are over (a retried batch is usually all one or all the other). With
// "on_disconnect": "continue" the first request's calls go on after its client left,
// so that the retry finds them running, or done, instead of cancelled.

// resumable splits a batch's calls into those the session has on record (their
// records) and those to run. A recorded call of another tool under the same id is a
// 400: the id was reused, and neither result would be the right answer. A call the
// model gave no id (a Gemini functionCall without one) has nothing to be found by,
// and runs.
func (s *Server) resumable(ctx context.Context, sess *session.Session, b session.Batch) (found []*store.Call, rest []session.CallRequest, err error) {
	for i, c := range b.Calls {
		if c.NoID {
			rest = append(rest, c)
			continue
		}
		rec, err := s.Calls.GetCallByToolCallID(ctx, sess.ID, c.ToolCallID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			rest = append(rest, c)
		case err != nil:
			return nil, nil, fmt.Errorf("looking up calls to resume: %w", err)
		case rec.Name != c.Name:
			return nil, nil, errorf(CodeBadRequest, fmt.Sprintf("calls[%d]: id %q is on record in this session for a call of %s, not %s; resume needs ids that name the same call as before",
				b.Position(i), c.ToolCallID, rec.Name, c.Name))
		default:
			found = append(found, rec)
		}
	}
	return found, rest, nil
}

// runContext is the context a request's calls run under: the request's own, which
// ends when the client goes away, or, detached, one that ends only when the daemon
// stops (the context StopContext marked; see app.Run).
func runContext(r *http.Request, detached bool) (context.Context, context.CancelFunc) {
	if !detached {
		return r.Context(), func() {}
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	stop, _ := r.Context().Value(stopKey{}).(context.Context)
	if stop == nil {
		return ctx, func() { cancel(nil) }
	}
	unhook := context.AfterFunc(stop, func() { cancel(context.Cause(stop)) })
	return ctx, func() { unhook(); cancel(nil) }
}

type stopKey struct{}

// StopContext marks ctx, the base context of the daemon's requests, as the one whose
// end stops every call: calls that outlive their client (on_disconnect: continue)
// still end with it.
func StopContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, stopKey{}, ctx)
}

// followAll emits a tool_start for each record, in order, then follows them all
// until each has its message, which it emits. It returns when every one has, or
// when ctx ends. The output of a call another replica runs is relayed from there to
// relayed (relay.go), ahead of its message; nil relays none.
//
// A call left because the daemon stops (see follow) gets a message saying so, but
// for a request another replica forwarded here: that replica is not stopping and
// follows the call on from its record once this stream ends before done, so no
// message is emitted and cut reports that the stream must end without done.
func (s *Server) followAll(ctx context.Context, r *http.Request, recs []*store.Call, relayed chan<- progress.Event, emit func(session.Event)) (cut bool) {
	tenant := tenantOf(r)
	forwarded := r.Header.Get(forwardedHeader) != ""
	var cutOnce sync.Once
	calls := make([]*session.Call, len(recs))
	announced := make([]map[string]bool, len(recs))
	for i, rec := range recs {
		calls[i] = &session.Call{ID: rec.ID, CallRequest: session.CallRequest{ToolCallID: rec.ToolCallID, Name: rec.Name, Arguments: rec.Arguments}}
		announced[i] = map[string]bool{}
		// As the call's own stream had it: its tool_start, its approval requests (also
		// those decided since: a call that ran asked first), then its output so far
		// (eventReplay). Read before the start is queued, so that no output the call
		// writes meanwhile comes between them; follow announces the requests made later.
		asked, _, _ := s.approvalEvents(ctx, tenant, calls[i], announced[i])
		emit(session.Event{Type: session.EventStart, Call: calls[i], TS: rec.CreatedAt, Resumed: true})
		for _, ev := range asked {
			emit(ev)
		}
		emit(session.Event{Type: eventReplay, Call: calls[i]})
	}
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The relay starts when the call is another replica's, at once or once
			// another replica claims it (an approval decided there).
			var rl *outputRelay
			relayFrom := func(cur *store.Call) <-chan struct{} {
				if rl == nil {
					rl = s.relayOutput(ctx, r, cur, relayed)
				}
				if rl == nil {
					return nil
				}
				return rl.done
			}
			final, left := s.follow(ctx, tenant, rec, calls[i], announced[i], emit, relayFrom)
			if rl != nil && left {
				rl.stop()
				<-rl.done
			} else if rl != nil {
				rl.wait(ctx)
			}
			if final == nil {
				return
			}
			if left && forwarded {
				cutOnce.Do(func() { cut = true })
				return
			}
			// Cut to the token budget by the writer (streamWriter.truncate).
			emit(session.Event{Type: session.EventMessage, Call: calls[i], Result: final.Result, TS: timeOr(final.FinishedAt), Resumed: true, GoesOn: left})
		}()
	}
	wg.Wait()
	return cut
}

// follow waits until the recorded call rec is over and returns its final record, or
// nil when ctx ends first. On the way it emits the call's approval requests, each
// once (announced holds those emitted already, by approval id), and input_required
// once the call waits for an outside answer (ask_user), as
// the call's own stream had them. A call of this process wakes it as soon as its
// result is recorded; one of another replica, or one whose result the store refused
// for a while, is read again on decisions and answers and every 2 seconds, and when
// relayEnded closes (the owner ended its stream of the call's output, which it does
// after the call's message). relayFrom starts relaying the call's output from its
// replica when that is another one (nil when none is relayed), and is called again
// when the record names another replica (one that claimed the call).
//
// When the daemon begins to stop, a call this process does not run (one waiting for a
// decision or an answer, which the store keeps, or one another replica runs) is left
// at once, as the calls' own streams leave their waits (Executor.ReleaseWaiting),
// rather than holding the drain until its deadline: left is then true and the
// returned record's result is a cancelled one saying the call goes on.
func (s *Server) follow(ctx context.Context, tenant string, rec *store.Call, call *session.Call, announced map[string]bool, emit func(session.Event), relayFrom func(*store.Call) <-chan struct{}) (final *store.Call, left bool) {
	relayEnded := relayFrom(rec)
	watch := s.watchCall(rec.ID)
	defer watch.close()
	stopping := s.stopping()
	pending := false // rec has an approval request nobody decided yet
	announce := func(rec *store.Call) {
		asked, waits, ok := s.approvalEvents(ctx, tenant, call, announced)
		pending = waits
		if !ok {
			return // the next wake reads them again
		}
		for _, ev := range asked {
			emit(ev)
		}
		if rec.Status != store.CallWaiting || pending || announced[""] || s.Tools == nil {
			return
		}
		if e, ok := s.Tools.Lookup(rec.Name); ok && e.Spec.External {
			announced[""] = true
			emit(session.Event{Type: session.EventExternal, Call: call, TS: timeOr(rec.StartedAt)})
		}
	}
	for !rec.Status.Terminal() || rec.Result == nil {
		announce(rec)
		watch.rearm()
		leave := stopping
		if watch.over != nil {
			leave = nil // this process runs it: the drain waits for its result
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-leave:
			return leftAtShutdown(rec, call.Name, pending, announced[""]), true
		case <-watch.over:
		case <-watch.decided:
		case <-watch.tick.C:
		case <-relayEnded:
			relayEnded = nil // once: a relay that failed at once must not spin
		}
		cur, err := s.Calls.GetCall(ctx, rec.ID)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false
			}
			// The store is briefly unreachable (a lost connection, a restart): read
			// again at the next tick rather than end the stream without its message.
			s.log.WarnContext(ctx, "reading a followed call's record failed; retrying", "call_id", rec.ID, "err", err)
			continue
		}
		if cur.Owner != rec.Owner && relayEnded == nil {
			relayEnded = relayFrom(cur)
		}
		rec = cur
	}
	return rec, false
}

// approvalEvents returns the approval_required events of call's requests not in
// announced yet, oldest first, marking them there, and whether one of its requests
// is still pending. ok is false when the store could not be read.
func (s *Server) approvalEvents(ctx context.Context, tenant string, call *session.Call, announced map[string]bool) (evs []session.Event, pending, ok bool) {
	if s.Approvals == nil {
		return nil, false, true
	}
	list, err := s.Approvals.Store.ListApprovals(ctx, store.ApprovalFilter{Tenant: tenant, CallID: call.ID})
	if err != nil {
		return nil, false, false
	}
	for i := len(list) - 1; i >= 0; i-- { // oldest first
		a := list[i]
		pending = pending || a.Status == store.ApprovalPending
		if !announced[a.ID] {
			announced[a.ID] = true
			evs = append(evs, session.Event{Type: session.EventApproval, Call: call, Approval: a, Suggestions: suggestionsOf(a), TS: a.CreatedAt})
		}
	}
	return evs, pending, true
}

// stopping returns a channel closed once the daemon begins to stop (nil without an
// executor): what waits for something this process does not do leaves then, rather
// than holding the drain until its deadline.
func (s *Server) stopping() <-chan struct{} {
	if s.Exec == nil {
		return nil
	}
	return s.Exec.Released()
}

// leftAtShutdown is rec with the result a stream following it gets when the daemon
// stops before the call is over: the call goes on (its request stays pending, its
// answer can still be posted, or another replica runs it), as the message says.
func leftAtShutdown(rec *store.Call, name string, approvalPending, external bool) *store.Call {
	left := *rec
	switch {
	case approvalPending:
		left.Result = tool.ErrorResult(tool.KindCancelled, "the server shut down while %s waited for approval; the request stays pending and the call runs if it is approved", name)
	case external:
		left.Result = tool.ErrorResult(tool.KindCancelled, "the server shut down while %s waited for its answer; the answer can still be posted", name)
	default:
		left.Result = tool.ErrorResult(tool.KindCancelled, "the server shut down while this stream followed %s, which has not finished (%s) and goes on; its result will be at GET /v1/tool-calls/%s", name, rec.Status, rec.ID)
	}
	left.FinishedAt = nil
	return &left
}

// callWatch wakes whoever waits for a recorded call to change: when this process's
// call is over (Executor.Running), on decisions and answers (TopicCall), and every
// 2 s, for a call of another replica or one whose result the store refused a while.
type callWatch struct {
	s       *Server
	id      string
	over    <-chan struct{} // nil while the call is not this process's
	decided <-chan string
	tick    *time.Ticker
	stop    func()
}

func (s *Server) watchCall(id string) *callWatch {
	w := &callWatch{s: s, id: id, tick: time.NewTicker(2 * time.Second), stop: func() {}}
	if s.Approvals != nil {
		w.decided, w.stop = s.Approvals.Notifier.Subscribe(store.TopicCall)
	}
	w.rearm()
	return w
}

// rearm looks for this process's call again: over fires once per tracker.
func (w *callWatch) rearm() {
	if w.s.Exec != nil {
		w.over = w.s.Exec.Running(w.id)
	}
}

func (w *callWatch) close() {
	w.tick.Stop()
	w.stop()
}

func timeOr(t *time.Time) time.Time {
	if t == nil {
		return time.Now()
	}
	return *t
}
