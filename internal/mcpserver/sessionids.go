package mcpserver

import (
	"crypto/rand"
	"slices"
	"sync"
	"time"
)

// sessionIDs issues the endpoint's MCP session ids and knows which are live. mcp-go's
// stateful manager remembers every ended session id forever (one map entry per MCP
// session the daemon ever served); here an ended id is forgotten, and any id that is not
// live gets the answer a terminated one gets (404: the client starts a new session),
// so memory follows the live sessions only. An id from before a restart is answered
// the same way.
type sessionIDs struct {
	mu   sync.Mutex
	live map[string]*use
}

// use is when a live session was last used, and how many of its requests (calls,
// event streams) are open: a session with one open is not idle.
type use struct {
	last time.Time
	open int
}

func newSessionIDs() *sessionIDs { return &sessionIDs{live: map[string]*use{}} }

// Generate returns a new id with 128 random bits.
func (m *sessionIDs) Generate() string {
	id := "mcp-session-" + rand.Text()
	m.mu.Lock()
	m.live[id] = &use{last: time.Now()}
	m.mu.Unlock()
	return id
}

// Validate reports an id that is not live as terminated.
func (m *sessionIDs) Validate(id string) (isTerminated bool, err error) {
	m.mu.Lock()
	_, ok := m.live[id]
	m.mu.Unlock()
	return !ok, nil
}

// Terminate forgets id; clients may end their sessions.
func (m *sessionIDs) Terminate(id string) (isNotAllowed bool, err error) {
	m.mu.Lock()
	delete(m.live, id)
	m.mu.Unlock()
	return false, nil
}

// count is the number of live ids.
func (m *sessionIDs) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// begin counts a request of a live session as open until the returned func is
// called; an id that is not live is not counted.
func (m *sessionIDs) begin(id string) (end func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.live[id]
	if u == nil {
		return func() {}
	}
	u.open++
	u.last = time.Now()
	return func() {
		m.mu.Lock()
		u.open--
		u.last = time.Now()
		m.mu.Unlock()
	}
}

// idle returns the live sessions with no open request, last used before cutoff.
func (m *sessionIDs) idle(cutoff time.Time) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id, u := range m.live {
		if u.open == 0 && u.last.Before(cutoff) {
			out = append(out, id)
		}
	}
	return out
}

// overCap returns the sessions to forget so that at most max stay live: the least
// recently used of those with no request open. Sessions with one open are counted
// but kept, so the count may stay above max while they last.
func (m *sessionIDs) overCap(max int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for excess := len(m.live) - max; excess > 0; excess-- {
		oldest, at := "", time.Time{}
		for id, u := range m.live {
			if u.open == 0 && !slices.Contains(out, id) && (oldest == "" || u.last.Before(at)) {
				oldest, at = id, u.last
			}
		}
		if oldest == "" {
			break
		}
		out = append(out, oldest)
	}
	return out
}
