package mcpserver

import (
	"strings"
	"testing"
)

// TestSessionIDs: ids are unique and live until terminated; a terminated, unknown or
// malformed id is answered as terminated (404 in mcp-go), and nothing is remembered
// of an ended session.
func TestSessionIDs(t *testing.T) {
	m := newSessionIDs()
	const n = 1000
	ids := map[string]bool{}
	for range n {
		id := m.Generate()
		if !strings.HasPrefix(id, "mcp-session-") || len(id) != len("mcp-session-")+26 || ids[id] {
			t.Fatalf("Generate = %q (seen before: %v)", id, ids[id])
		}
		ids[id] = true
	}
	for id := range ids {
		if term, err := m.Validate(id); term || err != nil {
			t.Fatalf("Validate(live %q) = %v, %v", id, term, err)
		}
	}
	for id := range ids {
		if notAllowed, err := m.Terminate(id); notAllowed || err != nil {
			t.Fatalf("Terminate(%q) = %v, %v", id, notAllowed, err)
		}
		if term, err := m.Validate(id); !term || err != nil {
			t.Fatalf("Validate(ended %q) = %v, %v; want terminated", id, term, err)
		}
	}
	if got := m.count(); got != 0 {
		t.Fatalf("%d ids kept after every session ended, want 0", got)
	}
	for _, id := range []string{"", "mcp-session-unknown", "not-an-id", strings.Repeat("x", 1<<16)} {
		if term, err := m.Validate(id); !term || err != nil {
			t.Fatalf("Validate(%.20q) = %v, %v; want terminated", id, term, err)
		}
	}
	if _, err := m.Terminate("mcp-session-unknown"); err != nil {
		t.Fatal(err)
	}
}
