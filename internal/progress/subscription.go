package progress

import (
	"sync"
	"sync/atomic"
	"time"
)

// Event is one published piece of a call's progress, or its end (Closed).
//
// Text holds the exact bytes a tool emitted (a Go string is a byte sequence), so
// it may be binary or invalid UTF-8. Event boundaries always fall on Emit
// boundaries: if every Emit of a stream is valid UTF-8, so is every event. A
// JSON encoder replaces invalid UTF-8 with U+FFFD, so consumers that need the
// exact bytes read them with Hub.Read using Offset.
type Event struct {
	CallID     string `json:"call_id"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	SessionID  string `json:"session_id,omitempty"`
	// Stream is empty on the closed event.
	Stream string `json:"stream,omitempty"`
	Text   string `json:"text,omitempty"`
	// Offset is where Text begins in the stream's log. A consumer that expected a
	// smaller offset missed events and can read the gap with Hub.Read.
	Offset int64 `json:"offset"`
	// Progress is the call's latest numeric progress when a report's line is in
	// Text (of several reports in one flush, the latest). Consumers that show it keep
	// the highest Seq they have shown.
	Progress *Value `json:"progress,omitempty"`
	// Closed marks the call's last event: its progress is complete.
	Closed bool      `json:"closed"`
	TS     time.Time `json:"ts"`
}

// Value is a call's numeric progress as its tool last reported it.
type Value struct {
	Progress float64 `json:"progress"`
	// Total is 0 when unknown.
	Total   float64 `json:"total,omitempty"`
	Message string  `json:"message,omitempty"`
	// Seq numbers a call's reports from 1, so a consumer that has shown report n
	// skips any older value it meets later (read back while filling a gap, say).
	Seq uint64    `json:"seq"`
	TS  time.Time `json:"ts"`
}

// Filter selects the events a subscription receives: those of any call in
// CallIDs, those of calls in session SessionID, or, with All, every event.
// The zero Filter matches nothing.
type Filter struct {
	CallIDs   []string
	SessionID string
	All       bool
	// Buffer is how many events may wait unread before they are dropped; 0 means
	// Config.SubscriberBuffer. Consumers that fill gaps from the log themselves can
	// take a small one.
	Buffer int
}

// Subscription receives matching events in a bounded buffer. When the buffer is
// full an event is dropped for this subscription only and counted in Dropped;
// the consumer then recovers the bytes by offset with Hub.Read, which also
// reports whether the call finished (its closed event may be the one dropped).
type Subscription struct {
	subs    *subscribers
	calls   map[string]struct{}
	session string
	all     bool
	ch      chan Event
	dropped atomic.Int64

	mu     sync.Mutex // orders delivery against close(ch)
	closed bool
}

// Events delivers the matching events of each call in order. The channel is
// closed by Close and by Hub.Stop.
func (s *Subscription) Events() <-chan Event { return s.ch }

// Dropped counts the events dropped because the buffer was full.
func (s *Subscription) Dropped() int64 { return s.dropped.Load() }

// Close ends the subscription and closes its channel. It is idempotent.
func (s *Subscription) Close() {
	s.subs.remove(s)
	s.shut()
}

func (s *Subscription) shut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
}

func (s *Subscription) deliver(ev Event, dropped func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.ch <- ev:
	default:
		s.dropped.Add(1)
		dropped()
	}
}

// Subscribe starts receiving events that match f. After Stop the subscription
// comes back already closed.
func (h *Hub) Subscribe(f Filter) *Subscription {
	buf := f.Buffer
	if buf <= 0 {
		buf = h.cfg.SubscriberBuffer
	}
	s := &Subscription{
		subs:    &h.subs,
		session: f.SessionID,
		all:     f.All,
		ch:      make(chan Event, buf),
	}
	if len(f.CallIDs) > 0 {
		s.calls = make(map[string]struct{}, len(f.CallIDs))
		for _, id := range f.CallIDs {
			s.calls[id] = struct{}{}
		}
	}
	if !h.subs.add(s) {
		s.shut()
	}
	return s
}

// publish fans ev out without blocking and counts it.
func (h *Hub) publish(ev Event) {
	h.metrics.events.Inc()
	drop := h.metrics.dropped.Inc
	ss := &h.subs
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	for s := range ss.all {
		s.deliver(ev, drop)
	}
	for s := range ss.byCall[ev.CallID] {
		s.deliver(ev, drop)
	}
	if ev.SessionID == "" {
		return
	}
	for s := range ss.bySession[ev.SessionID] {
		if _, dup := s.calls[ev.CallID]; !dup {
			s.deliver(ev, drop)
		}
	}
}

// subscribers indexes subscriptions by what they follow. Adding and removing one
// costs as much as its filter; publishing reads the index under a read lock
// (delivery never blocks).
type subscribers struct {
	mu        sync.RWMutex
	stopped   bool
	all       map[*Subscription]struct{}
	byCall    map[string]map[*Subscription]struct{}
	bySession map[string]map[*Subscription]struct{}
}

func (ss *subscribers) init() {
	ss.all = make(map[*Subscription]struct{})
	ss.byCall = make(map[string]map[*Subscription]struct{})
	ss.bySession = make(map[string]map[*Subscription]struct{})
}

func (ss *subscribers) add(s *Subscription) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.stopped {
		return false
	}
	if s.all {
		ss.all[s] = struct{}{}
		return true
	}
	for id := range s.calls {
		addTo(ss.byCall, id, s)
	}
	if s.session != "" {
		addTo(ss.bySession, s.session, s)
	}
	return true
}

func (ss *subscribers) remove(s *Subscription) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.all, s)
	for id := range s.calls {
		removeFrom(ss.byCall, id, s)
	}
	if s.session != "" {
		removeFrom(ss.bySession, s.session, s)
	}
}

func (ss *subscribers) closeAll() {
	ss.mu.Lock()
	ss.stopped = true
	var all []*Subscription
	for s := range ss.all {
		all = append(all, s)
	}
	for _, m := range []map[string]map[*Subscription]struct{}{ss.byCall, ss.bySession} {
		for _, set := range m {
			for s := range set {
				all = append(all, s)
			}
		}
	}
	ss.init()
	ss.mu.Unlock()
	for _, s := range all {
		s.shut()
	}
}

func addTo(m map[string]map[*Subscription]struct{}, key string, s *Subscription) {
	set, ok := m[key]
	if !ok {
		set = make(map[*Subscription]struct{}, 1)
		m[key] = set
	}
	set[s] = struct{}{}
}

func removeFrom(m map[string]map[*Subscription]struct{}, key string, s *Subscription) {
	if set, ok := m[key]; ok {
		delete(set, s)
		if len(set) == 0 {
			delete(m, key)
		}
	}
}
