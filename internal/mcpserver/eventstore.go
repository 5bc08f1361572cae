package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"

	mcpsrv "github.com/mark3labs/mcp-go/server"
)

// What the endpoint keeps of its event streams so that a client whose stream broke
// (a proxy's idle timeout, a flaky network) resumes it with Last-Event-ID. Constants,
// not config keys: they only bound how far back a client may resume, and a client
// resumes within seconds of the break; a call's result, the event that matters, is
// the newest one of its stream, never the one dropped. The global cap bounds the
// whole daemon whatever mcp_endpoint.max_sessions allows (10,000 sessions at 4 MiB
// would be 40 GiB).
const (
	replayEvents     = 1000     // per MCP session
	replayBytes      = 4 << 20  // per MCP session
	replayTotalBytes = 64 << 20 // all MCP sessions of the process
	// eventOverhead is counted with each event's message: its bookkeeping
	// (node, slice slot), so that many tiny events are bounded too.
	eventOverhead = 96
)

// replayStore is mcp-go's EventStore for the endpoint, bounded: each MCP session
// keeps its newest events (at most maxEvents and maxBytes), and all sessions together
// at most maxTotal bytes; the oldest events go first. A Last-Event-ID whose event is
// no longer kept is unknown (mcp-go answers 400). A session's events are purged when
// it ends, and events of a session that is no longer live are not kept.
type replayStore struct {
	maxEvents, maxBytes, maxTotal int
	// live reports whether an MCP session is live: a call that ends after its
	// session did must not leave events nobody can resume (nor purge).
	live func(sessionID string) bool
	// stored, if set, is told of each event stored, with StoreEvent's context.
	stored func(ctx context.Context, sessionID, streamID string, message json.RawMessage)

	mu       sync.Mutex
	seq      uint64
	total    int // bytes kept, overhead included
	sessions map[string]*eventLog
	// oldest and newest are the ends of the list of every kept event, in the
	// order stored, for the global cap.
	oldest, newest *storedEvent
}

// eventLog is one MCP session's kept events, oldest first (seqs rise).
type eventLog struct {
	id     string
	events []*storedEvent
	bytes  int
	// dropped is the seq of the newest event this session lost to a cap, to tell a
	// client that comes back too late that it did.
	dropped uint64
}

type storedEvent struct {
	seq        uint64
	log        *eventLog
	stream     string
	msg        json.RawMessage
	prev, next *storedEvent // the global list
}

func (ev *storedEvent) size() int { return len(ev.msg) + eventOverhead }

func newReplayStore(maxEvents, maxBytes, maxTotal int, live func(string) bool) *replayStore {
	return &replayStore{maxEvents: maxEvents, maxBytes: maxBytes, maxTotal: maxTotal, live: live, sessions: map[string]*eventLog{}}
}

var _ mcpsrv.EventStore = (*replayStore)(nil)

// StoreEvent keeps message as the session's newest event and returns its id, a
// process-wide sequence number. For a session that is not live it keeps nothing and
// returns no id: nothing can resume from it.
func (s *replayStore) StoreEvent(ctx context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	if s.live != nil && !s.live(sessionID) {
		return "", nil
	}
	if s.stored != nil {
		s.stored(ctx, sessionID, streamID, message)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.sessions[sessionID]
	if l == nil {
		l = &eventLog{id: sessionID}
		s.sessions[sessionID] = l
	}
	s.seq++
	// mcp-go may reuse message's buffer once this returns.
	ev := &storedEvent{seq: s.seq, log: l, stream: streamID, msg: append(json.RawMessage(nil), message...)}
	l.events = append(l.events, ev)
	l.bytes += ev.size()
	s.total += ev.size()
	ev.prev = s.newest
	if s.newest != nil {
		s.newest.next = ev
	} else {
		s.oldest = ev
	}
	s.newest = ev
	// The newest event stays whatever its size: it may be the result a client
	// is waiting for.
	for len(l.events) > 1 && (len(l.events) > s.maxEvents || l.bytes > s.maxBytes) {
		s.drop(l.events[0])
	}
	for s.total > s.maxTotal && s.oldest != ev {
		s.drop(s.oldest)
	}
	return strconv.FormatUint(ev.seq, 10), nil
}

// drop forgets ev, the oldest event of its session. Callers hold mu.
func (s *replayStore) drop(ev *storedEvent) {
	l := ev.log
	l.events[0] = nil
	l.events = l.events[1:]
	l.bytes -= ev.size()
	l.dropped = ev.seq
	s.total -= ev.size()
	s.unlink(ev)
	if len(l.events) == 0 {
		delete(s.sessions, l.id)
	}
}

func (s *replayStore) unlink(ev *storedEvent) {
	if ev.prev != nil {
		ev.prev.next = ev.next
	} else {
		s.oldest = ev.next
	}
	if ev.next != nil {
		ev.next.prev = ev.prev
	} else {
		s.newest = ev.prev
	}
	ev.prev, ev.next = nil, nil
}

// ReplayEventsAfter sends the events kept after lastEventID on its stream, in order,
// and returns the stream's id; an event that is not kept (never issued to this
// session, dropped by a cap, purged) is an error wrapping mcp-go's ErrUnknownEventID.
func (s *replayStore) ReplayEventsAfter(_ context.Context, sessionID, lastEventID string, send func(eventID string, message json.RawMessage) error) (string, error) {
	s.mu.Lock()
	stream, i, err := s.find(sessionID, lastEventID)
	var tail []*storedEvent
	if err == nil {
		for _, ev := range s.sessions[sessionID].events[i+1:] {
			if ev.stream == stream {
				tail = append(tail, ev)
			}
		}
	}
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	// Sent outside the lock: a slow client must not hold up every session's
	// calls. The messages are never modified once stored.
	for _, ev := range tail {
		if err := send(strconv.FormatUint(ev.seq, 10), ev.msg); err != nil {
			return "", err
		}
	}
	return stream, nil
}

// find returns the stream and the index in its session's events of the event id.
// Callers hold mu.
func (s *replayStore) find(sessionID, id string) (stream string, i int, err error) {
	seq, perr := strconv.ParseUint(id, 10, 64)
	l := s.sessions[sessionID]
	if perr == nil && l != nil {
		i = sort.Search(len(l.events), func(i int) bool { return l.events[i].seq >= seq })
		if i < len(l.events) && l.events[i].seq == seq {
			return l.events[i].stream, i, nil
		}
	}
	if perr == nil && l != nil && seq <= l.dropped {
		return "", 0, fmt.Errorf("%w: %s is older than the last %d events (%d MiB) this MCP session keeps",
			mcpsrv.ErrUnknownEventID, id, s.maxEvents, s.maxBytes>>20)
	}
	return "", 0, fmt.Errorf("%w: %s", mcpsrv.ErrUnknownEventID, id)
}

// streamOf returns the stream of the session's event id, or why the session cannot
// resume from it.
func (s *replayStore) streamOf(sessionID, id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stream, _, err := s.find(sessionID, id)
	return stream, err
}

// PurgeSession forgets the session's events; mcp-go calls it when the session ends.
func (s *replayStore) PurgeSession(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.sessions[sessionID]
	if l == nil {
		return nil
	}
	for _, ev := range l.events {
		s.total -= ev.size()
		s.unlink(ev)
	}
	delete(s.sessions, sessionID)
	return nil
}

// size reports the events and bytes kept, for tests.
func (s *replayStore) size() (events, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.sessions {
		events += len(l.events)
	}
	return events, s.total
}
