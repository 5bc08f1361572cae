package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

func testSessionRoundTrip(t *testing.T, s store.Store) {
	tests := []struct {
		name string
		sess store.Session
	}{
		{"spec kept byte for byte", store.Session{
			ID: "ses_1", Tenant: "acme",
			Spec:      json.RawMessage(`{"available_tools": ["read_file", "mcp__github__*"],  "metadata":{"ü":"<&>"}}`),
			CreatedAt: base, UpdatedAt: at(time.Hour),
		}},
		{"nil spec, empty tenant", store.Session{ID: "ses_2", CreatedAt: base, UpdatedAt: base}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.sess
			if err := s.CreateSession(t.Context(), &in); err != nil {
				t.Fatalf("CreateSession: %v", err)
			}
			got, err := s.GetSession(t.Context(), tt.sess.ID)
			if err != nil {
				t.Fatalf("GetSession: %v", err)
			}
			if got.ID != tt.sess.ID || got.Tenant != tt.sess.Tenant {
				t.Errorf("got id %q tenant %q, want %q %q", got.ID, got.Tenant, tt.sess.ID, tt.sess.Tenant)
			}
			if string(got.Spec) != string(tt.sess.Spec) {
				t.Errorf("Spec = %q, want %q", got.Spec, tt.sess.Spec)
			}
			if tt.sess.Spec == nil && got.Spec != nil {
				t.Errorf("Spec = %q, want nil", got.Spec)
			}
			checkTime(t, "CreatedAt", got.CreatedAt, tt.sess.CreatedAt)
			checkTime(t, "UpdatedAt", got.UpdatedAt, tt.sess.UpdatedAt)
		})
	}
}

func testSessionDefaults(t *testing.T, s store.Store) {
	before := time.Now().Add(-time.Second)
	sess := &store.Session{ID: "ses_d", Tenant: "t"}
	if err := s.CreateSession(t.Context(), sess); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if sess.CreatedAt.Before(before) || sess.CreatedAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("zero CreatedAt was set to %s, want about now", sess.CreatedAt)
	}
	if !sess.UpdatedAt.Equal(sess.CreatedAt) {
		t.Errorf("zero UpdatedAt was set to %s, want CreatedAt %s", sess.UpdatedAt, sess.CreatedAt)
	}
	got, err := s.GetSession(t.Context(), "ses_d")
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	checkTime(t, "CreatedAt", got.CreatedAt, sess.CreatedAt)
}

func testSessionDuplicate(t *testing.T, s store.Store) {
	mustCreateSession(t, s, "ses_1")
	err := s.CreateSession(t.Context(), &store.Session{ID: "ses_1", Tenant: "other", CreatedAt: base, UpdatedAt: base})
	wantErrIs(t, "second CreateSession", err, store.ErrConflict)
	got, err := s.GetSession(t.Context(), "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Tenant != "acme" {
		t.Errorf("tenant = %q after a refused duplicate, want the first one's %q", got.Tenant, "acme")
	}
}

func testSessionNotFound(t *testing.T, s store.Store) {
	mustCreateSession(t, s, "ses_1")
	_, err := s.GetSession(t.Context(), "ses_missing")
	wantErrIs(t, "GetSession(unknown)", err, store.ErrNotFound)
}

func testUpdateSessionSpec(t *testing.T, s store.Store) {
	mustCreateSession(t, s, "ses_1")
	mustCreateSession(t, s, "ses_2")
	spec := json.RawMessage(`{"rules": [{"allow":"read_file"}]}`)
	if err := s.UpdateSessionSpec(t.Context(), "ses_1", json.RawMessage(`{}`), spec, at(time.Minute)); err != nil {
		t.Fatalf("UpdateSessionSpec: %v", err)
	}
	got, err := s.GetSession(t.Context(), "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Spec) != string(spec) {
		t.Errorf("Spec = %s, want %s", got.Spec, spec)
	}
	checkTime(t, "UpdatedAt", got.UpdatedAt, at(time.Minute))
	checkTime(t, "CreatedAt", got.CreatedAt, base)
	// An earlier time replaces the spec but does not move updated_at back.
	older := json.RawMessage(`{"rules": []}`)
	if err := s.UpdateSessionSpec(t.Context(), "ses_1", got.Spec, older, at(time.Second)); err != nil {
		t.Fatalf("UpdateSessionSpec(earlier): %v", err)
	}
	if got, err = s.GetSession(t.Context(), "ses_1"); err != nil {
		t.Fatal(err)
	}
	if string(got.Spec) != string(older) {
		t.Errorf("Spec = %s, want %s", got.Spec, older)
	}
	checkTime(t, "UpdatedAt after an earlier update", got.UpdatedAt, at(time.Minute))

	// A writer that read the spec before another one changed it writes nothing:
	// its change would drop the other's.
	err = s.UpdateSessionSpec(t.Context(), "ses_1", spec, json.RawMessage(`{"rules": ["stale"]}`), at(time.Hour))
	wantErrIs(t, "UpdateSessionSpec(stale prev)", err, store.ErrConflict)
	if got, err = s.GetSession(t.Context(), "ses_1"); err != nil {
		t.Fatal(err)
	}
	if string(got.Spec) != string(older) {
		t.Errorf("Spec after a stale write = %s, want %s", got.Spec, older)
	}
	checkTime(t, "UpdatedAt after a stale write", got.UpdatedAt, at(time.Minute))
	// The same JSON written differently is another spec: prev is compared byte for byte.
	err = s.UpdateSessionSpec(t.Context(), "ses_1", json.RawMessage(`{"rules":[]}`), spec, at(time.Hour))
	wantErrIs(t, "UpdateSessionSpec(prev reformatted)", err, store.ErrConflict)

	other, err := s.GetSession(t.Context(), "ses_2")
	if err != nil {
		t.Fatal(err)
	}
	if string(other.Spec) != `{}` {
		t.Errorf("other session's spec changed to %s", other.Spec)
	}

	err = s.UpdateSessionSpec(t.Context(), "ses_missing", json.RawMessage(`{}`), spec, at(time.Minute))
	wantErrIs(t, "UpdateSessionSpec(unknown)", err, store.ErrNotFound)
	err = s.UpdateSessionSpec(t.Context(), "ses_1", older, json.RawMessage(`{not json`), at(time.Minute))
	wantErrIs(t, "UpdateSessionSpec(bad JSON)", err, store.ErrInvalid)
}
