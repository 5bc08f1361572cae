package store

import (
	"strings"
	"testing"
)

// auditPlanCases are GET /v1/audit's listings: one tenant's (an approver's) and
// every tenant's (an admin's), first pages and later ones. Each must be a range of an
// index read newest first: no scan of the whole log, no sort.
var auditPlanCases = []struct {
	name                 string
	f                    AuditFilter
	sqliteIndex, pgIndex string
}{
	{"tenant", AuditFilter{Tenant: "acme", Limit: 100}, "audit_log_tenant_ts_idx", "audit_log_tenant_ts_idx"},
	{"tenant page", AuditFilter{Tenant: "acme", Before: 42, Limit: 100}, "audit_log_tenant_ts_idx", "audit_log_tenant_ts_idx"},
	{"tenant action", AuditFilter{Tenant: "acme", Action: "key.created", Before: 42, Limit: 100}, "audit_log_tenant_ts_idx", "audit_log_tenant_ts_idx"},
	{"all", AuditFilter{Limit: 100}, "audit_log_ts_idx", "audit_log_ts_id_idx"},
	{"all page", AuditFilter{Before: 42, Limit: 100}, "audit_log_ts_idx", "audit_log_ts_id_idx"},
}

func TestAuditPlanSQLite(t *testing.T) {
	t.Parallel()
	s, err := OpenSQLite(t.Context(), t.TempDir()+"/plan.db")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range auditPlanCases {
		q, args := sqliteAuditQuery(tc.f)
		got := sqlitePlan(t, s, q, args...)
		if !strings.Contains(got, "INDEX "+tc.sqliteIndex) || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want a search of %s with no sort", tc.name, got, tc.sqliteIndex)
		}
	}
}

func TestAuditPlanPostgres(t *testing.T) {
	t.Parallel()
	conn := pgConnNoSeqScan(t)
	// On an empty table a bitmap scan and a sort cost nothing; with both off the
	// planner shows whether the index alone can answer in order.
	if _, err := conn.Exec(t.Context(), "SET enable_bitmapscan = off; SET enable_sort = off"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range auditPlanCases {
		q, args := pgAuditQuery(tc.f)
		got := pgPlan(t, conn, q, args...)
		if !strings.Contains(got, tc.pgIndex) || strings.Contains(got, "Sort") {
			t.Errorf("%s: plan %q, want a scan of %s with no sort", tc.name, got, tc.pgIndex)
		}
		if tc.f.Before > 0 && !strings.Contains(got, "Index Cond: ") {
			t.Errorf("%s: plan %q, want the cursor in the index condition", tc.name, got)
		}
	}
}
