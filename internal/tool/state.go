package tool

import "sync"

// State is a per-session key-value bag for tools: file guards, job tables,
// scratchpads. Keys should be namespaced by the tool or package that owns them.
type State struct {
	mu sync.Mutex
	m  map[string]any
}

// NewState returns an empty State.
func NewState() *State { return &State{m: map[string]any{}} }

// LoadOrStore returns the value under key, storing the result of mk first if there is none.
func (s *State) LoadOrStore(key string, mk func() any) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[key]; ok {
		return v
	}
	v := mk()
	s.m[key] = v
	return v
}
