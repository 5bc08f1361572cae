package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// RunAPIKeys runs the conformance suite of store.APIKeyStore. open is called once
// per subtest and must return an empty store closed in t.Cleanup.
func RunAPIKeys(t *testing.T, open func(t *testing.T) store.APIKeyStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.APIKeyStore)
	}{
		{"RoundTrip", testAPIKeyRoundTrip},
		{"ListByTenant", testAPIKeyList},
		{"Revoke", testAPIKeyRevoke},
		{"Invalid", testAPIKeyInvalid},
		{"ContextCancelled", testAPIKeyContextCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

func testAPIKeyRoundTrip(t *testing.T, s store.APIKeyStore) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC)
	k := &store.APIKey{ID: "key_1", Tenant: "acme", Name: "ci bot", Roles: []string{"agent", "approver"}, Hash: "h1", CreatedAt: at}
	if err := s.CreateAPIKey(t.Context(), k); err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	got, err := s.APIKeyByHash(t.Context(), "h1")
	if err != nil {
		t.Fatalf("APIKeyByHash: %v", err)
	}
	if !reflect.DeepEqual(got, k) {
		t.Errorf("read back %+v, want %+v", got, k)
	}
	if _, err := s.APIKeyByHash(t.Context(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown hash: %v, want ErrNotFound", err)
	}
	for _, dup := range []*store.APIKey{
		{ID: "key_1", Tenant: "acme", Roles: []string{"agent"}, Hash: "h2"},
		{ID: "key_2", Tenant: "acme", Roles: []string{"agent"}, Hash: "h1"},
	} {
		if err := s.CreateAPIKey(t.Context(), dup); !errors.Is(err, store.ErrConflict) {
			t.Errorf("duplicate %+v: %v, want ErrConflict", dup, err)
		}
	}
}

func testAPIKeyList(t *testing.T, s store.APIKeyStore) {
	if keys, err := s.ListAPIKeys(t.Context(), ""); err != nil || keys == nil || len(keys) != 0 {
		t.Fatalf("empty store lists %v, %v; want an empty slice", keys, err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, tenant := range []string{"a", "b", "a"} {
		k := &store.APIKey{ID: "key_" + string(rune('x'+i)), Tenant: tenant, Roles: []string{"agent"}, Hash: "h" + string(rune('x'+i)), CreatedAt: base.Add(time.Duration(i) * time.Minute)}
		if err := s.CreateAPIKey(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(tenant string) []string {
		keys, err := s.ListAPIKeys(t.Context(), tenant)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, k := range keys {
			out = append(out, k.ID)
		}
		return out
	}
	if got := ids("a"); !reflect.DeepEqual(got, []string{"key_x", "key_z"}) {
		t.Errorf("tenant a: %v", got)
	}
	if got := ids(""); !reflect.DeepEqual(got, []string{"key_x", "key_y", "key_z"}) {
		t.Errorf("all tenants: %v", got)
	}
}

func testAPIKeyRevoke(t *testing.T, s store.APIKeyStore) {
	k := &store.APIKey{ID: "key_r", Tenant: "t", Roles: []string{"admin"}, Hash: "hr"}
	if err := s.CreateAPIKey(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	if rk, err := s.RevokeAPIKey(t.Context(), "key_r", at); err != nil {
		t.Fatalf("RevokeAPIKey: %v", err)
	} else if rk.ID != "key_r" || rk.Tenant != "t" || rk.RevokedAt == nil || !rk.RevokedAt.Equal(at) {
		t.Fatalf("RevokeAPIKey returned %+v; want key_r of tenant t, revoked at %s", rk, at)
	}
	got, err := s.APIKeyByHash(t.Context(), "hr")
	if err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(at) {
		t.Fatalf("after revoking: %+v, %v; want revoked at %s", got, err, at)
	}
	if _, err := s.RevokeAPIKey(t.Context(), "key_r", at); !errors.Is(err, store.ErrConflict) {
		t.Errorf("revoke twice: %v, want ErrConflict", err)
	}
	if _, err := s.RevokeAPIKey(t.Context(), "key_none", at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoke unknown: %v, want ErrNotFound", err)
	}
}

func testAPIKeyInvalid(t *testing.T, s store.APIKeyStore) {
	for _, k := range []*store.APIKey{
		nil,
		{Tenant: "t", Roles: []string{"agent"}, Hash: "h"},
		{ID: "k", Roles: []string{"agent"}, Hash: "h"},
		{ID: "k", Tenant: "t", Roles: []string{"agent"}},
		{ID: "k", Tenant: "t", Hash: "h"},
		{ID: "k", Tenant: "t", Hash: "h", Roles: []string{"agent,admin"}},
	} {
		if err := s.CreateAPIKey(t.Context(), k); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateAPIKey(%+v) = %v, want ErrInvalid", k, err)
		}
	}
}

func testAPIKeyContextCancelled(t *testing.T, s store.APIKeyStore) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.APIKeyByHash(ctx, "h"); err == nil {
		t.Error("APIKeyByHash with a cancelled context succeeded")
	}
	if err := s.CreateAPIKey(ctx, &store.APIKey{ID: "k", Tenant: "t", Roles: []string{"agent"}, Hash: "h"}); err == nil {
		t.Error("CreateAPIKey with a cancelled context succeeded")
	}
}
