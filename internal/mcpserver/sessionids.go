package mcpserver

import (
	"crypto/rand"
	"sync"
)

// sessionIDs issues the endpoint's MCP session ids and knows which are live. mcp-go's
// stateful manager remembers every ended session id forever (one map entry per MCP
// session the daemon ever served); here an ended id is forgotten, and any id that is not
// live gets the answer a terminated one gets (404: the client starts a new session),
// so memory follows the live sessions only. An id from before a restart is answered
// the same way.
type sessionIDs struct {
	mu   sync.Mutex
	live map[string]struct{}
}

func newSessionIDs() *sessionIDs { return &sessionIDs{live: map[string]struct{}{}} }

// Generate returns a new id with 128 random bits.
func (m *sessionIDs) Generate() string {
	id := "mcp-session-" + rand.Text()
	m.mu.Lock()
	m.live[id] = struct{}{}
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
