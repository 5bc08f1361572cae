package store

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
	{"page", CallFilter{Tenant: "acme", Before: time.Now(), BeforeID: "tc_x"}, "tool_calls_tenant_created_idx"},
	{"active page", CallFilter{Tenant: "acme", Statuses: []CallStatus{CallPending, CallRunning, CallWaiting}, Before: time.Now(), BeforeID: "tc_x"},
		"tool_calls_tenant_active_idx"},
	{"live", CallFilter{Tenant: "acme", Live: true}, "tool_calls_tenant_active_idx"},
	{"live page", CallFilter{Tenant: "acme", Live: true, Before: time.Now(), BeforeID: "tc_x"}, "tool_calls_tenant_active_idx"},
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
		if !tc.f.Before.IsZero() && !strings.Contains(got, "(created_at,id)<(?,?)") {
			t.Errorf("%s: plan %q, want the page's cursor as a range of the index", tc.name, got)
		}
	}
}

func TestRecentCallsPlanPostgres(t *testing.T) {
	t.Parallel()
	conn := pgConnNoSeqScan(t)
	for _, tc := range recentPlanCases {
		q, args := pgRecentCallsQuery(tc.f)
		got := pgPlan(t, conn, q, args...)
		if !strings.Contains(got, tc.index) || strings.Contains(got, "Sort") {
			t.Errorf("%s: plan %q, want a scan of %s with no sort", tc.name, got, tc.index)
		}
		if !tc.f.Before.IsZero() && !strings.Contains(got, "AND (ROW(created_at, id) < ROW(") {
			t.Errorf("%s: plan %q, want the page's cursor in the index condition", tc.name, got)
		}
	}
}

// pgConnNoSeqScan is a connection of a fresh PostgreSQL store on which sequential
// scans are off: on an empty table one is cheapest, and the plan tests want to see
// which index the planner can use.
func pgConnNoSeqScan(t *testing.T) *pgxpool.Conn {
	t.Helper()
	s, err := OpenPostgres(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	conn, err := s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(t.Context(), "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// pgPlan is PostgreSQL's plan of q (EXPLAIN, which does not run it), its lines
// joined by "; ".
func pgPlan(t *testing.T, conn *pgxpool.Conn, q string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(t.Context(), "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, strings.TrimSpace(line))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// Crash recovery and the replica sweep find a replica's unfinished calls through the
// small partial index of unfinished calls, not the table nor an index of every call.
func TestOwnerActivePlanSQLite(t *testing.T) {
	t.Parallel()
	s, err := OpenSQLite(t.Context(), t.TempDir()+"/plan.db")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := sqlitePlan(t, s, sqliteAbandonCalls, "failed", "{}", "{}", "failed", "failed", "2025-01-01T00:00:00.000000Z", "r1")
	if !strings.Contains(got, "USING INDEX tool_calls_owner_active_idx") {
		t.Errorf("plan %q, want a search of tool_calls_owner_active_idx", got)
	}
}

func TestOwnerActivePlanPostgres(t *testing.T) {
	t.Parallel()
	conn := pgConnNoSeqScan(t)
	for name, got := range map[string]string{
		"abandon": pgPlan(t, conn, pgAbandonCalls, "failed", []byte("{}"), []byte("{}"), "failed", "failed", time.Now(), "r1"),
		"stale":   pgPlan(t, conn, pgStaleReplicas, "r1", int64(1000)),
	} {
		if !strings.Contains(got, "tool_calls_owner_active_idx") {
			t.Errorf("%s: plan %q, want tool_calls_owner_active_idx", name, got)
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
	for _, tc := range []struct {
		name, q, index string
		args           []any
	}{
		{"finished calls", sqliteFinishedCalls, "tool_calls_tenant_created_idx (tenant=? AND created_at<?)", []any{"acme", "2025-01-01", "2025-01-01", 10}},
		{"unused sessions", sqliteUnusedSessions + ` ORDER BY updated_at, id LIMIT ?`, "sessions_updated_idx", []any{"2025-01-01", 10}},
		{"finished calls checked again", sqliteStillFinished, "sqlite_autoindex_tool_calls_1 (id=?)", []any{`["tc_1"]`, "2025-01-01"}},
	} {
		got := sqlitePlan(t, s, tc.q, tc.args...)
		if !strings.Contains(got, "USING INDEX "+tc.index) || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want a search of %s with no sort", tc.name, got, tc.index)
		}
	}
	// The tenants come from index probes, not a scan of the calls.
	for _, op := range []string{">", ">="} {
		got := sqlitePlan(t, s, retentionNextTenant(op, "?"), "acme")
		if strings.Contains(got, "SCAN tool_calls") || !strings.Contains(got, "tool_calls_tenant_created_idx (tenant>?)") {
			t.Errorf("next tenant (%s): plan %q, want a search of tool_calls_tenant_created_idx", op, got)
		}
	}
}

// TestRetentionPlanPostgres: as on SQLite, the finished calls of a tenant are a range
// of tool_calls_tenant_created_idx.
func TestRetentionPlanPostgres(t *testing.T) {
	t.Parallel()
	conn := pgConnNoSeqScan(t)
	if got := pgPlan(t, conn, pgFinishedCalls, time.Now(), 10, ""); !strings.Contains(got, "tool_calls_tenant_created_idx") {
		t.Errorf("finished calls: plan %q, want tool_calls_tenant_created_idx", got)
	}
	for _, op := range []string{">", ">="} {
		if got := pgPlan(t, conn, retentionNextTenant(op, "$1"), "acme"); !strings.Contains(got, "Index Only Scan using tool_calls_tenant_created_idx") {
			t.Errorf("next tenant (%s): plan %q, want an index only scan of tool_calls_tenant_created_idx", op, got)
		}
	}
}

// TestSessionCallsPlanSQLite: a page of a session's calls is read from the session's
// entries of tool_calls_session_tool_call_id_idx, never by scanning the table or
// walking the tenant's calls. That index is not in time order, so the session's rows
// older than the cursor are sorted for the page (calls_session.go says why no index
// serves the order).
func TestSessionCallsPlanSQLite(t *testing.T) {
	t.Parallel()
	s, err := OpenSQLite(t.Context(), t.TempDir()+"/plan.db")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, p := range map[string]CallPage{"first": {Limit: 50}, "page": {Limit: 50, Before: time.Now(), BeforeID: "tc_x"}, "all": {}} {
		q, args := sqliteSessionCallsQuery("ses_1", p)
		got := sqlitePlan(t, s, q, args...)
		if !strings.Contains(got, "USING INDEX tool_calls_session_tool_call_id_idx (session_id=?)") || strings.Contains(got, "tenant") {
			t.Errorf("%s: plan %q, want a search of the session's entries of tool_calls_session_tool_call_id_idx", name, got)
		}
	}
}

func TestSessionCallsPlanPostgres(t *testing.T) {
	t.Parallel()
	conn := pgConnNoSeqScan(t)
	for name, p := range map[string]CallPage{"first": {Limit: 50}, "page": {Limit: 50, Before: time.Now(), BeforeID: "tc_x"}, "all": {}} {
		q, args := pgSessionCallsQuery("ses_1", p)
		got := pgPlan(t, conn, q, args...)
		if !strings.Contains(got, "tool_calls_session_tool_call_id_idx") || !strings.Contains(got, "session_id = 'ses_1'") || strings.Contains(got, "tenant") {
			t.Errorf("%s: plan %q, want the session's entries of tool_calls_session_tool_call_id_idx", name, got)
		}
	}
}
