package retention_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/retention"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// TestSweepAcrossTenants: a sweep whose batches go on from the tenant the one before
// stopped in (batches end in the middle of a tenant here) deletes every due call of
// every tenant, and no recent one, on both stores.
func TestSweepAcrossTenants(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var st interface {
				store.Store
				retention.CallStore
			}
			if kind == "sqlite" {
				s, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				st = s
			} else {
				p, err := store.OpenPostgres(ctx, pgtest.URL(t))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close() })
				st = p
			}
			now := time.Now().UTC()
			old, recent := now.Add(-48*time.Hour), now.Add(-time.Hour)
			const tenants, due = 5, 700 // 3500 due: four batches, three ending inside a tenant
			for i := range tenants {
				var calls []*store.Call
				for j := range due + 1 {
					finished := old
					if j == due {
						finished = recent
					}
					calls = append(calls, &store.Call{ID: fmt.Sprintf("tc_%d_%04d", i, j), SessionID: fmt.Sprintf("ses_%d", i), Tenant: fmt.Sprintf("t%d", i),
						ToolCallID: fmt.Sprintf("call_%d", j), Name: "read_file", Arguments: json.RawMessage(`{}`),
						Status: store.CallSucceeded, Result: tool.TextResult("ok"), CreatedAt: finished, FinishedAt: &finished})
				}
				if err := st.WriteCalls(ctx, calls, nil); err != nil {
					t.Fatal(err)
				}
			}
			sw, err := retention.New(retention.Config{Calls: 24 * time.Hour}, st, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c, _, err := sw.Sweep(ctx, now); err != nil || c != tenants*due {
				t.Fatalf("Sweep = %d calls, %v; want %d", c, err, tenants*due)
			}
			for i := range tenants {
				left, err := st.ListCalls(ctx, fmt.Sprintf("ses_%d", i), store.CallPage{})
				if err != nil || len(left) != 1 || left[0].ID != fmt.Sprintf("tc_%d_%04d", i, due) {
					t.Errorf("tenant t%d: %d calls left (%v), want its recent one", i, len(left), err)
				}
			}
		})
	}
}
