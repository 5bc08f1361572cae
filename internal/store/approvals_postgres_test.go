package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/store/storetest"
)

func TestPostgresApprovals(t *testing.T) {
	t.Parallel()
	storetest.RunApprovals(t, func(t *testing.T) store.Store { return openPostgres(t) })
}

// openPostgresHandles opens n stores on one new schema, as n replicas would.
func openPostgresHandles(t *testing.T, n int) []*store.Postgres {
	t.Helper()
	u := pgtest.URL(t)
	var out []*store.Postgres
	for range n {
		p, err := store.OpenPostgres(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		out = append(out, p)
	}
	return out
}

// TestPostgresClaimAcrossHandles: replicas sharing one schema claim a call once.
func TestPostgresClaimAcrossHandles(t *testing.T) {
	t.Parallel()
	hs := openPostgresHandles(t, 2)
	storetest.ClaimRace(t, hs[0], hs[1])
}

// TestPostgresExpireAcrossHandles: replicas expiring at once expire (audit, and
// return) each approval exactly once.
func TestPostgresExpireAcrossHandles(t *testing.T) {
	t.Parallel()
	hs := openPostgresHandles(t, 2)
	const approvals, workers = 20, 6
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range approvals {
		c := &store.Call{ID: fmt.Sprintf("tc_%d", i), SessionID: "ses_1", Tenant: "acme", Name: "shell", Status: store.CallPending}
		if err := hs[0].WriteCalls(t.Context(), []*store.Call{c}, nil); err != nil {
			t.Fatal(err)
		}
		exp := base.Add(time.Minute)
		if err := hs[0].CreateApproval(t.Context(), &store.Approval{ID: fmt.Sprintf("apr_%d", i), CallID: c.ID, CreatedAt: base, ExpiresAt: &exp}); err != nil {
			t.Fatal(err)
		}
	}
	got := make([][]*store.Approval, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[w], errs[w] = hs[w%2].ExpireApprovals(t.Context(), base.Add(time.Hour))
		}()
	}
	wg.Wait()
	// Each approval is returned to exactly one of them (which tells of it).
	returned := map[string]int{}
	for w := range workers {
		if errs[w] != nil {
			t.Errorf("worker %d: %v", w, errs[w])
		}
		for _, a := range got[w] {
			returned[a.ID]++
		}
	}
	for i := range approvals {
		if id := fmt.Sprintf("apr_%d", i); returned[id] != 1 {
			t.Errorf("%s returned by %d ExpireApprovals, want 1", id, returned[id])
		}
	}
	if len(returned) != approvals {
		t.Errorf("ExpireApprovals returned %d approvals in total (%v), want %d", len(returned), returned, approvals)
	}
	audit, err := hs[1].ListAudit(t.Context(), store.AuditFilter{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	expired := 0
	for _, e := range audit {
		if e.Action == store.AuditApprovalExpired {
			expired++
		}
	}
	if expired != approvals {
		t.Errorf("%d expiry audit entries, want %d", expired, approvals)
	}
}

// TestPostgresExpireRace: sweeps and late decisions on two replicas expire each
// request once.
func TestPostgresExpireRace(t *testing.T) {
	t.Parallel()
	hs := openPostgresHandles(t, 2)
	storetest.ExpireRace(t, hs[0], hs[1])
}

func TestPostgresAuditIsTransactional(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	s, err := store.OpenPostgres(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.AuditIsTransactional(t, s, func(t *testing.T) {
		conn, err := pgx.Connect(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(t.Context(), `
			CREATE FUNCTION audit_refused() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'audit refused'; END $$;
			CREATE TRIGGER audit_refused BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_refused();`); err != nil {
			t.Fatalf("create trigger: %v", err)
		}
	})
}
