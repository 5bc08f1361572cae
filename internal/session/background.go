package session

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// A background call's result goes to every open stream of its session (Subscribe):
// GET /v1/sessions/{id}/events and the session's batch streams. Behind a Service
// those streams are open on any replica, and the call ran on one. So the replica
// that ran it announces the result (TopicBackground), and every other replica that
// holds the session with a stream open reads the record and publishes it there.
// A notification can be lost (see store.Notifier): the record keeps the result.

// TopicBackground is notified when a background call's result was published to its
// session; the payload is the session id, the replica that ran the call and the
// call id, separated by spaces.
const TopicBackground = "session_background"

// CallReader reads a call's record.
type CallReader interface {
	GetCall(ctx context.Context, id string) (*store.Call, error)
}

// ShareBackgroundResults makes the manager publish to its live sessions the results
// of background calls other replicas ran (heard through the notifier, UseNotifier),
// read from calls and shaped by shape (the result as a stream sends it: cut to the
// token budget); nil shape sends the record's. Call it before Start.
func (m *Manager) ShareBackgroundResults(calls CallReader, shape func(*tool.Result) *tool.Result) {
	m.calls, m.shape = calls, shape
}

// announceBackground tells the other replicas that the background call callID of
// session s has its result.
func (m *Manager) announceBackground(ctx context.Context, s *Session, callID string) {
	if m == nil || m.notifier == nil {
		return
	}
	_ = m.notifier.Notify(context.WithoutCancel(ctx), TopicBackground, s.ID+" "+m.replica+" "+callID)
}

// backgroundReadTimeout bounds the read of a background call's record for a
// notification.
const backgroundReadTimeout = 10 * time.Second

// heardBackground publishes the result of another replica's background call to the
// live session the payload names, when a stream of it is open here. The record is
// read off the notifier's loop.
func (m *Manager) heardBackground(ctx context.Context, log *slog.Logger, payload string) {
	id, rest, _ := strings.Cut(payload, " ")
	replica, callID, _ := strings.Cut(rest, " ")
	if id == "" || callID == "" || replica == m.replica || m.calls == nil {
		return // a resynchronisation, this process's own, or nothing to read with
	}
	m.mu.Lock()
	s, ok := m.live[id]
	m.mu.Unlock()
	if !ok || !s.subscribed() {
		return
	}
	m.readers.Add(1)
	go func() {
		defer m.readers.Done()
		ctx, cancel := context.WithTimeout(ctx, backgroundReadTimeout)
		defer cancel()
		rec, err := m.calls.GetCall(ctx, callID)
		if err != nil {
			log.Warn("reading the result of another replica's background call failed", "session_id", id, "call_id", callID, "err", err)
			return
		}
		if rec.SessionID != id || !rec.Status.Terminal() || rec.Result == nil {
			return // not this session's, or not a result the record holds
		}
		res := rec.Result
		if m.shape != nil {
			res = m.shape(res)
		}
		at := time.Now()
		if rec.FinishedAt != nil {
			at = *rec.FinishedAt
		}
		s.publish(Event{Type: EventResult, Result: res, TS: at,
			Call: &Call{ID: rec.ID, CallRequest: CallRequest{ToolCallID: rec.ToolCallID, Name: rec.Name, Arguments: rec.Arguments}}})
	}()
}

// subscribed reports whether a stream of the session's events is open.
func (s *Session) subscribed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs) > 0
}
