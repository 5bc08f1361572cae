package server

import (
	"net/http"
	"time"

	"github.com/toolserverd/toolserverd/internal/progress"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// callEvents replays one call as NDJSON — tool_start, its approval requests, the
// output recorded so far — then follows it until its message, then done. It works
// for calls whose stream is gone (a client that reconnects, a call decided after a
// restart) and for calls still running.
func (s *Server) callEvents(w http.ResponseWriter, r *http.Request) {
	f, err := toolmgr.ParseFormat(r.URL.Query().Get("format"))
	if err != nil || f == toolmgr.FormatMCP {
		s.writeError(w, r, errorf(CodeBadRequest, "format must be native, openai or anthropic"))
		return
	}
	rec, err := s.call(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var finished <-chan string
	if s.Approvals != nil {
		ch, stop := s.Approvals.Notifier.Subscribe(store.TopicCall)
		defer stop()
		finished = ch
	}
	sw := &streamWriter{format: f, hub: s.Progress, cursors: map[string]map[string]int64{}, closed: map[string]bool{}, keepAlive: s.cfg.KeepAlive}
	if s.Progress != nil {
		sub := s.Progress.Subscribe(progress.Filter{CallIDs: []string{rec.ID}, Buffer: 16})
		defer sub.Close()
		sw.prog = sub.Events()
	}
	sw.out = newNDJSON(w)
	call := &session.Call{ID: rec.ID, CallRequest: session.CallRequest{ToolCallID: rec.ToolCallID, Name: rec.Name, Arguments: rec.Arguments}}
	sw.out.Encode(startEvent{Type: string(session.EventStart), ToolCallID: rec.ToolCallID, CallID: rec.ID, Name: rec.Name, TS: unixSeconds(rec.CreatedAt)})
	// The call's approval requests and, once it waits for an external answer (ask_user),
	// input_required: each once, as the call's own stream had them, also when they
	// come while the call is followed.
	announced := map[string]bool{}
	announce := func(rec *store.Call) {
		pending := false
		if s.Approvals != nil {
			list, err := s.Approvals.Store.ListApprovals(r.Context(), store.ApprovalFilter{Tenant: tenantOf(r), CallID: rec.ID})
			if err != nil {
				return // the next wake reads them again
			}
			for i := len(list) - 1; i >= 0; i-- { // oldest first
				a := list[i]
				pending = pending || a.Status == store.ApprovalPending
				if !announced[a.ID] {
					announced[a.ID] = true
					sw.out.Encode(toApprovalEvent(session.Event{Type: session.EventApproval, Call: call, Approval: a, Suggestions: suggestionsOf(a), TS: a.CreatedAt}))
				}
			}
		}
		if rec.Status != store.CallWaiting || pending || announced[""] || s.Tools == nil {
			return
		}
		if e, ok := s.Tools.Lookup(rec.Name); ok && e.Spec.External {
			announced[""] = true
			sw.out.Encode(inputEvent{Type: string(session.EventExternal), ToolCallID: rec.ToolCallID, CallID: rec.ID, Name: rec.Name,
				Arguments: rec.Arguments, TS: unixSeconds(timeOr(rec.StartedAt))})
		}
	}
	announce(rec)
	if s.Progress != nil {
		for _, st := range s.Progress.Streams(rec.ID) {
			sw.fill(rec.ID, rec.ToolCallID, st, -1)
		}
	}
	sw.out.Flush()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	ka, kaC := keepalive(s.cfg.KeepAlive)
	if ka != nil {
		defer ka.Stop()
	}
	for !rec.Status.Terminal() || rec.Result == nil {
		select {
		case <-r.Context().Done():
			return
		case <-kaC:
			sw.out.keepAlive(ka, s.cfg.KeepAlive)
			continue
		case pe, ok := <-sw.prog:
			if !ok {
				sw.prog = nil
				continue
			}
			sw.progress(pe)
			sw.out.Flush()
			continue
		case <-finished:
		case <-tick.C:
		}
		cur, err := s.Calls.GetCall(r.Context(), rec.ID)
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			// The store is briefly unreachable (a lost connection, a restart): read
			// again at the next tick rather than end the stream without its message.
			s.log.WarnContext(r.Context(), "reading a followed call's record failed; retrying", "call_id", rec.ID, "err", err)
			continue
		}
		rec = cur
		if !rec.Status.Terminal() {
			announce(rec)
			sw.out.Flush()
		}
	}
	sw.drain()
	sw.complete(rec.ID, rec.ToolCallID)
	msg := rec.Result
	if s.Exec != nil {
		msg = s.Exec.Truncate(rec.Result)
	}
	sw.out.Encode(resultLine(session.EventMessage, f, session.Event{Call: call, Result: msg, TS: timeOr(rec.FinishedAt)}))
	sw.out.Encode(doneEvent{Type: "done", TS: unixSeconds(time.Now())})
	sw.out.Flush()
}

func timeOr(t *time.Time) time.Time {
	if t == nil {
		return time.Now()
	}
	return *t
}
