package store

import (
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// recentPlanCases are the listings the web console polls: everything, and the calls
// still active. Each must be answered from its index, newest first, without reading
// the whole table or sorting it.
var recentPlanCases = []struct {
	name  string
	f     CallFilter
	index string
}{
	{"all", CallFilter{Tenant: "acme"}, "tool_calls_tenant_created_idx"},
	{"active", CallFilter{Tenant: "acme", Statuses: []CallStatus{CallPending, CallRunning, CallWaiting}}, "tool_calls_tenant_active_idx"},
	{"running", CallFilter{Tenant: "acme", Statuses: []CallStatus{CallRunning}}, "tool_calls_tenant_active_idx"},
}

func TestRecentCallsPlanSQLite(t *testing.T) {
	t.Parallel()
	s, err := OpenSQLite(t.Context(), t.TempDir()+"/plan.db")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range recentPlanCases {
		q, args := sqliteRecentCallsQuery(tc.f)
		got := sqlitePlan(t, s, q, args...)
		if !strings.Contains(got, "USING INDEX "+tc.index) || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want a search of %s with no sort", tc.name, got, tc.index)
		}
	}
}

func TestRecentCallsPlanPostgres(t *testing.T) {
	t.Parallel()
	s, err := OpenPostgres(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// An empty table makes a sequential scan cheapest; forbid it to see which index
	// the planner can use.
	if _, err := conn.Exec(t.Context(), "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(t.Context(), "RESET enable_seqscan") //nolint:errcheck // best effort on a released test connection
	for _, tc := range recentPlanCases {
		q, args := pgRecentCallsQuery(tc.f)
		rows, err := conn.Query(t.Context(), "EXPLAIN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, strings.TrimSpace(line))
		}
		rows.Close()
		got := strings.Join(plan, "; ")
		if !strings.Contains(got, tc.index) || strings.Contains(got, "Sort") {
			t.Errorf("%s: plan %q, want a scan of %s with no sort", tc.name, got, tc.index)
		}
	}
}

// TestApprovedUnclaimedPlanSQLite: the sweep for approved calls nobody ran reads the
// active calls' partial index, not every call ever recorded.
func TestApprovedUnclaimedPlanSQLite(t *testing.T) {
	t.Parallel()
	s, err := OpenSQLite(t.Context(), t.TempDir()+"/plan.db")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := sqlitePlan(t, s, approvedUnclaimedQuery("?", "?"), "2025-01-01T00:00:00.000000Z", 100)
	if !strings.Contains(got, "tool_calls_tenant_active_idx") || strings.Contains(got, "SCAN c;") || strings.HasSuffix(got, "SCAN c") {
		t.Errorf("plan %q, want the calls read through tool_calls_tenant_active_idx", got)
	}
}

// sqlitePlan is SQLite's query plan of q, its steps joined by "; ".
func sqlitePlan(t *testing.T, s *SQLite, q string, args ...any) string {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "; ")
}

// TestRetentionPlanSQLite: retention's batches are read from their indexes, oldest
// first, without reading every call or session ever recorded or sorting them.
func TestRetentionPlanSQLite(t *testing.T) {
	t.Parallel()
	s, err := OpenSQLite(t.Context(), t.TempDir()+"/plan.db")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct{ name, q, index string }{
		{"finished calls", sqliteFinishedCalls, "tool_calls_finished_idx"},
		{"unused sessions", sqliteUnusedSessions + ` ORDER BY updated_at, id LIMIT ?`, "sessions_updated_idx"},
	} {
		got := sqlitePlan(t, s, tc.q, "2025-01-01", 10)
		if !strings.Contains(got, "USING INDEX "+tc.index) || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want a search of %s with no sort", tc.name, got, tc.index)
		}
	}
}
