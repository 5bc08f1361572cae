package session

import (
	"context"
	"encoding/json"
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
// A notification can be lost (see store.Notifier): the record keeps the result, and
// when the listener reconnects the records are read again (resyncBackground).

// TopicBackground is notified when a background call's result was published to its
// session; the payload is the session id, the replica that ran the call and the
// call id, separated by spaces.
const TopicBackground = "session_background"

// TopicBackgroundApproval is notified when a background call's approval request was
// published to its session (approval_required); the payload is the session id, the
// replica that runs the call and the approval id, separated by spaces.
const TopicBackgroundApproval = "session_background_approval"

// CallReader reads a call's record.
type CallReader interface {
	GetCall(ctx context.Context, id string) (*store.Call, error)
}

// ApprovalReader reads an approval request. A CallReader that is also one lets the
// manager publish other replicas' background calls' approval requests.
type ApprovalReader interface {
	GetApproval(ctx context.Context, id string) (*store.Approval, error)
}

// ShareBackgroundResults makes the manager publish to its live sessions the results
// of background calls other replicas ran, and their approval requests (heard through
// the notifier, UseNotifier), read from calls and shaped by shape (the result as a stream sends it: cut to the
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

// announceBackgroundApproval tells the other replicas that the background call of
// session s waits for approval apr (its approval_required went to s's streams here).
func (m *Manager) announceBackgroundApproval(ctx context.Context, s *Session, approvalID string) {
	if m == nil || m.notifier == nil {
		return
	}
	_ = m.notifier.Notify(context.WithoutCancel(ctx), TopicBackgroundApproval, s.ID+" "+m.replica+" "+approvalID)
}

// backgroundReadTimeout bounds the read of a background call's record for a
// notification.
const backgroundReadTimeout = 10 * time.Second

// CallLister lists a session's calls. A CallReader that is also one lets the manager
// re-read the records when notifications may have been lost.
type CallLister interface {
	ListCalls(ctx context.Context, sessionID string, p store.CallPage) ([]*store.Call, error)
}

// resyncCalls is how many of a session's newest calls a resynchronisation reads: a
// listener reconnects within seconds, and a session does not finish more background
// calls than this meanwhile.
const resyncCalls = 100

// sentSet remembers the newest sentSetMax ids sent to a session's streams, so that a
// resynchronisation does not send them again. A stream open for days must not make
// it grow without end: an id older than that many others is past any
// resynchronisation's reach (resyncCalls).
type sentSet struct {
	ids   map[string]struct{}
	order []string // oldest first
}

const sentSetMax = 1024

// add reports whether id is new, remembering it.
func (s *sentSet) add(id string) bool {
	if _, ok := s.ids[id]; ok {
		return false
	}
	if s.ids == nil {
		s.ids = map[string]struct{}{}
	}
	if len(s.order) == sentSetMax {
		delete(s.ids, s.order[0])
		s.order = append(s.order[:0], s.order[1:]...)
	}
	s.ids[id] = struct{}{}
	s.order = append(s.order, id)
	return true
}

// resyncSkew widens a resynchronisation's window back from when the session's
// streams opened, for the clocks of the replicas that finished the calls.
const resyncSkew = time.Second

// heardBackground publishes the result of another replica's background call to the
// live session the payload names, when a stream of it is open here. The record is
// read off the notifier's loop. An empty payload says notifications may have been
// lost (the listener reconnected): the records of every session with a stream open
// here are read again (resyncBackground).
func (m *Manager) heardBackground(ctx context.Context, log *slog.Logger, payload string) {
	if m.calls == nil {
		return // nothing to read with
	}
	if payload == "" {
		m.resyncBackground(ctx, log)
		return
	}
	m.readForStreams(ctx, payload, func(ctx context.Context, s *Session, callID string) {
		rec, err := m.calls.GetCall(ctx, callID)
		if err != nil {
			log.Warn("reading the result of another replica's background call failed", "session_id", s.ID, "call_id", callID, "err", err)
			return
		}
		m.publishResult(s, rec)
	})
}

// publishResult publishes rec, the record of another replica's background call of
// s, to s's streams, unless it is not this session's, holds no result, or its result
// was sent to them already (a notification and a resynchronisation may both read it).
func (m *Manager) publishResult(s *Session, rec *store.Call) {
	if rec.SessionID != s.ID || !rec.Status.Terminal() || rec.Result == nil {
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
	ev := Event{Type: EventResult, Result: res, TS: at,
		Call: &Call{ID: rec.ID, CallRequest: CallRequest{ToolCallID: rec.ToolCallID, Name: rec.Name, Arguments: rec.Arguments}}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.subs) == 0 {
		return
	}
	if !s.remoteResults.add(rec.ID) {
		return
	}
	for ch := range s.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// resyncBackground reads again, for every session with a stream open here, its
// newest calls and pending approval requests, and publishes the results of other
// replicas' background calls that finished since its streams opened, and their
// requests made since, that were not sent to them: their notifications may have been
// lost. Off the notifier's loop, like readForStreams.
func (m *Manager) resyncBackground(ctx context.Context, log *slog.Logger) {
	lister, ok := m.calls.(CallLister)
	if !ok {
		return
	}
	m.mu.Lock()
	live := make([]*Session, 0, len(m.live))
	for _, s := range m.live {
		live = append(live, s)
	}
	m.mu.Unlock()
	for _, s := range live {
		if !s.subscribed() {
			continue
		}
		m.readers.Add(1)
		go func() {
			defer m.readers.Done()
			ctx, cancel := context.WithTimeout(ctx, backgroundReadTimeout)
			defer cancel()
			s.mu.Lock()
			since := s.streamsSince.Add(-resyncSkew)
			s.mu.Unlock()
			calls, err := lister.ListCalls(ctx, s.ID, store.CallPage{Limit: resyncCalls})
			if err != nil {
				log.Warn("reading a session's calls again after notifications may have been lost failed", "session_id", s.ID, "err", err)
			}
			for _, rec := range calls {
				if rec.Owner == m.replica || rec.FinishedAt == nil || rec.FinishedAt.Before(since) || !s.background(rec.Name) {
					continue // this replica's own (published when it ran), or older than the streams
				}
				m.publishResult(s, rec)
			}
			m.resyncApprovals(ctx, log, s, since)
		}()
	}
}

// background reports whether the session's tool name runs in the background (its
// result goes to the session's streams).
func (s *Session) background(name string) bool {
	_, e, ok := s.Tools.Resolve(name)
	return ok && e.Spec.Mode == tool.ModeBackground
}

// readForStreams reads what a notification's payload ("session replica id") names,
// with read, when another replica sent it and the session is held here with a stream
// open; read runs off the notifier's loop, its context bounded by
// backgroundReadTimeout.
func (m *Manager) readForStreams(ctx context.Context, payload string, read func(ctx context.Context, s *Session, id string)) {
	sessionID, rest, _ := strings.Cut(payload, " ")
	replica, id, _ := strings.Cut(rest, " ")
	if sessionID == "" || id == "" || replica == m.replica {
		return // a resynchronisation, or this process's own
	}
	m.mu.Lock()
	s, ok := m.live[sessionID]
	m.mu.Unlock()
	if !ok || !s.subscribed() {
		return
	}
	m.readers.Add(1)
	go func() {
		defer m.readers.Done()
		ctx, cancel := context.WithTimeout(ctx, backgroundReadTimeout)
		defer cancel()
		read(ctx, s, id)
	}()
}

// subscribed reports whether a stream of the session's events is open.
func (s *Session) subscribed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs) > 0
}

// heardBackgroundApproval publishes the approval request of another replica's
// background call to the live session the payload names, when a stream of it is open
// here: the approval_required event the replica running the call published to its
// own streams, rebuilt from the approval and the call's records. One already decided
// is not announced: its decision may come before the notification.
func (m *Manager) heardBackgroundApproval(ctx context.Context, log *slog.Logger, payload string) {
	approvals, _ := m.calls.(ApprovalReader)
	if approvals == nil {
		return
	}
	m.readForStreams(ctx, payload, func(ctx context.Context, s *Session, approvalID string) {
		apr, err := approvals.GetApproval(ctx, approvalID)
		if err != nil {
			log.Warn("reading the approval request of another replica's background call failed", "session_id", s.ID, "approval_id", approvalID, "err", err)
			return
		}
		if apr.SessionID != s.ID || apr.Status != store.ApprovalPending {
			return
		}
		rec, err := m.calls.GetCall(ctx, apr.CallID)
		if err != nil {
			log.Warn("reading the background call of another replica's approval request failed", "session_id", s.ID, "call_id", apr.CallID, "err", err)
			return
		}
		m.publishApproval(s, apr, rec)
	})
}

// publishApproval publishes apr, the approval request of rec, another replica's
// background call of s, to s's streams, unless it is not this session's or was sent
// to them already (a notification and a resynchronisation may both read it).
func (m *Manager) publishApproval(s *Session, apr *store.Approval, rec *store.Call) {
	if apr.SessionID != s.ID || rec.SessionID != s.ID {
		return
	}
	var suggestions []string
	_ = json.Unmarshal(apr.Suggestions, &suggestions)
	ev := Event{Type: EventApproval, Approval: apr, Suggestions: suggestions, TS: apr.CreatedAt,
		Call: &Call{ID: rec.ID, CallRequest: CallRequest{ToolCallID: rec.ToolCallID, Name: rec.Name, Arguments: rec.Arguments}}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.subs) == 0 {
		return
	}
	if !s.remoteApprovals.add(apr.ID) {
		return
	}
	for ch := range s.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// ApprovalLister lists approval requests. A CallReader that is also one lets the
// manager re-read a session's pending requests when notifications may have been lost.
type ApprovalLister interface {
	ListApprovals(ctx context.Context, f store.ApprovalFilter) ([]*store.Approval, error)
}

// resyncApprovals publishes the pending approval requests of other replicas'
// background calls of s made since since that were not sent to its streams.
func (m *Manager) resyncApprovals(ctx context.Context, log *slog.Logger, s *Session, since time.Time) {
	lister, ok := m.calls.(ApprovalLister)
	if !ok {
		return
	}
	list, err := lister.ListApprovals(ctx, store.ApprovalFilter{Tenant: s.Tenant, SessionID: s.ID, Status: store.ApprovalPending,
		Limit: resyncCalls, Now: time.Now()})
	if err != nil {
		log.Warn("reading a session's approval requests again after notifications may have been lost failed", "session_id", s.ID, "err", err)
		return
	}
	for _, apr := range list {
		if apr.CreatedAt.Before(since) {
			continue
		}
		rec, err := m.calls.GetCall(ctx, apr.CallID)
		if err != nil || rec.Owner == m.replica || !s.background(rec.Name) {
			continue // this replica's own (published when it asked)
		}
		m.publishApproval(s, apr, rec)
	}
}
