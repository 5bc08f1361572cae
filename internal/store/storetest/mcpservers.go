package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// RunMCPServers runs the conformance suite of store.MCPServerStore. open is called
// once per subtest and must return an empty store closed in t.Cleanup.
func RunMCPServers(t *testing.T, open func(t *testing.T) store.MCPServerStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.MCPServerStore)
	}{
		{"RoundTrip", testMCPServerRoundTrip},
		{"Replace", testMCPServerReplace},
		{"Create", testMCPServerCreate},
		{"Delete", testMCPServerDelete},
		{"Invalid", testMCPServerInvalid},
		{"Empty", testMCPServerEmpty},
		{"ContextCancelled", testMCPServerContextCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

func mustPutMCPServer(t *testing.T, s store.MCPServerStore, name, cfg string) {
	t.Helper()
	if err := s.PutMCPServer(t.Context(), name, json.RawMessage(cfg)); err != nil {
		t.Fatalf("PutMCPServer(%s): %v", name, err)
	}
}

func listMCPServers(t *testing.T, s store.MCPServerStore) []store.MCPServerRecord {
	t.Helper()
	recs, err := s.ListMCPServers(t.Context())
	if err != nil {
		t.Fatalf("ListMCPServers: %v", err)
	}
	return recs
}

func testMCPServerRoundTrip(t *testing.T, s store.MCPServerStore) {
	before := time.Now().Add(-time.Second)
	// Kept byte for byte: spacing, key order, non-ASCII.
	cfgs := map[string]string{
		"github": `{"name":"github", "transport":"streamable_http","url":"http://127.0.0.1:1/mcp","headers":{"Authorization":"Bearer ü<&>"}}`,
		"fs":     `{"transport": "stdio", "command": "node", "args": ["dist/index.js", "/tmp"]}`,
	}
	for _, name := range []string{"github", "fs"} {
		mustPutMCPServer(t, s, name, cfgs[name])
	}
	recs := listMCPServers(t, s)
	if len(recs) != 2 || recs[0].Name != "fs" || recs[1].Name != "github" {
		t.Fatalf("ListMCPServers = %+v, want fs then github", recs)
	}
	for _, r := range recs {
		if string(r.Config) != cfgs[r.Name] {
			t.Errorf("%s config = %s, want %s (byte for byte)", r.Name, r.Config, cfgs[r.Name])
		}
		if r.CreatedAt.Before(before) || r.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("%s CreatedAt = %s, want about now", r.Name, r.CreatedAt)
		}
		if !r.UpdatedAt.Equal(r.CreatedAt) {
			t.Errorf("%s UpdatedAt = %s, want CreatedAt %s on insert", r.Name, r.UpdatedAt, r.CreatedAt)
		}
		if r.CreatedAt.Location() != time.UTC || !r.CreatedAt.Equal(r.CreatedAt.Truncate(time.Microsecond)) {
			t.Errorf("%s CreatedAt = %s, want UTC with microsecond precision", r.Name, r.CreatedAt.Format(time.RFC3339Nano))
		}
	}
}

func testMCPServerReplace(t *testing.T, s store.MCPServerStore) {
	mustPutMCPServer(t, s, "github", `{"v":1}`)
	first := listMCPServers(t, s)[0]
	time.Sleep(2 * time.Millisecond)
	mustPutMCPServer(t, s, "github", `{"v":2}`)
	recs := listMCPServers(t, s)
	if len(recs) != 1 {
		t.Fatalf("after replacing: %d records, want 1", len(recs))
	}
	got := recs[0]
	if string(got.Config) != `{"v":2}` {
		t.Errorf("config = %s, want the new one", got.Config)
	}
	if !got.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("CreatedAt = %s, want kept %s", got.CreatedAt, first.CreatedAt)
	}
	if !got.UpdatedAt.After(first.UpdatedAt) {
		t.Errorf("UpdatedAt = %s, want after %s", got.UpdatedAt, first.UpdatedAt)
	}
}

func testMCPServerDelete(t *testing.T, s store.MCPServerStore) {
	mustPutMCPServer(t, s, "a", `{}`)
	mustPutMCPServer(t, s, "b", `{}`)
	if err := s.DeleteMCPServer(t.Context(), "a"); err != nil {
		t.Fatalf("DeleteMCPServer(a): %v", err)
	}
	recs := listMCPServers(t, s)
	if len(recs) != 1 || recs[0].Name != "b" {
		t.Errorf("after delete: %+v, want only b", recs)
	}
	wantErrIs(t, "delete again", s.DeleteMCPServer(t.Context(), "a"), store.ErrNotFound)
	wantErrIs(t, "delete unknown", s.DeleteMCPServer(t.Context(), "nope"), store.ErrNotFound)
}

func testMCPServerInvalid(t *testing.T, s store.MCPServerStore) {
	for _, tt := range []struct {
		name, server, cfg string
	}{
		{"empty name", "", `{}`},
		{"empty config", "x", ``},
		{"config not JSON", "x", `{"a":`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := s.PutMCPServer(t.Context(), tt.server, json.RawMessage(tt.cfg))
			wantErrIs(t, "PutMCPServer", err, store.ErrInvalid)
		})
	}
	if recs := listMCPServers(t, s); len(recs) != 0 {
		t.Errorf("invalid puts wrote %+v", recs)
	}
}

func testMCPServerEmpty(t *testing.T, s store.MCPServerStore) {
	recs := listMCPServers(t, s)
	if recs == nil || len(recs) != 0 {
		t.Errorf("ListMCPServers on an empty store = %#v, want an empty non-nil slice", recs)
	}
}

func testMCPServerContextCancelled(t *testing.T, s store.MCPServerStore) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.PutMCPServer(ctx, "x", json.RawMessage(`{}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("PutMCPServer with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := s.ListMCPServers(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ListMCPServers with a cancelled context: %v, want context.Canceled", err)
	}
	if err := s.DeleteMCPServer(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("DeleteMCPServer with a cancelled context: %v, want context.Canceled", err)
	}
}

// testMCPServerCreate: CreateMCPServer inserts a new name and refuses one stored
// (ErrConflict), whose configuration stays.
func testMCPServerCreate(t *testing.T, s store.MCPServerStore) {
	if err := s.CreateMCPServer(t.Context(), "dyn", json.RawMessage(`{"command":"first"}`)); err != nil {
		t.Fatalf("CreateMCPServer: %v", err)
	}
	if err := s.CreateMCPServer(t.Context(), "dyn", json.RawMessage(`{"command":"second"}`)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateMCPServer of a stored name: %v, want ErrConflict", err)
	}
	if err := s.CreateMCPServer(t.Context(), "", json.RawMessage(`{}`)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("CreateMCPServer without a name: %v, want ErrInvalid", err)
	}
	recs := listMCPServers(t, s)
	if len(recs) != 1 || string(recs[0].Config) != `{"command":"first"}` {
		t.Errorf("ListMCPServers = %+v, want dyn with the first configuration", recs)
	}
}
