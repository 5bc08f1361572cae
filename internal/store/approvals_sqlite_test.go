package store_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/storetest"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func TestSQLiteApprovals(t *testing.T) {
	t.Parallel()
	storetest.RunApprovals(t, func(t *testing.T) store.Store { return openSQLite(t) })
}

// TestSQLiteClaimAcrossHandles: two handles on one file (two processes, in effect).
func TestSQLiteClaimAcrossHandles(t *testing.T) {
	t.Parallel()
	storetest.ClaimRace(t, sharedSQLite(t, 2)...)
}

// TestSQLiteExpireAcrossHandles: two handles on one file expire each request once.
func TestSQLiteExpireAcrossHandles(t *testing.T) {
	t.Parallel()
	storetest.ExpireRace(t, sharedSQLite(t, 2)...)
}

// sharedSQLite opens n handles on one new database file.
func sharedSQLite(t *testing.T, n int) []store.Store {
	path := filepath.Join(t.TempDir(), "shared.db")
	handles := make([]store.Store, 0, n)
	for range n {
		s, err := store.OpenSQLite(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		handles = append(handles, s)
	}
	return handles
}

func TestSQLiteAuditIsTransactional(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	storetest.AuditIsTransactional(t, s, func(t *testing.T) {
		db, err := sql.Open("sqlite", "file:"+s.Path()+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(t.Context(), `CREATE TRIGGER audit_refused BEFORE INSERT ON audit_log
			BEGIN SELECT RAISE(ABORT, 'audit refused'); END`); err != nil {
			t.Fatalf("create trigger: %v", err)
		}
	})
}

// TestSQLiteApprovalSurvivesRestart: a pending approval outlives the process; the
// decision after the restart is claimed once and finishes the call.
func TestSQLiteApprovalSurvivesRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.db")
	s, err := store.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	c := &store.Call{ID: "tc_1", SessionID: "ses_1", Tenant: "acme", ToolCallID: "call_1", Name: "shell",
		Status: store.CallRunning, Owner: "replica-1"}
	if err := s.WriteCalls(t.Context(), []*store.Call{c}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateApproval(t.Context(), &store.Approval{ID: "apr_1", CallID: "tc_1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = store.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Start-up abandons the previous process's calls, but not the waiting one.
	if n, err := s.AbandonCalls(t.Context(), "replica-1", tool.ErrorResult(tool.KindUnavailable, "restarted"), time.Time{}); err != nil || len(n) != 0 {
		t.Fatalf("AbandonCalls = %+v, %v; want none", n, err)
	}
	if _, err := s.DecideApproval(t.Context(), "apr_1", store.ApprovalDecision{Kind: store.DecisionApprove, Actor: "alice"}); err != nil {
		t.Fatalf("DecideApproval after restart: %v", err)
	}
	if err := s.ClaimCall(t.Context(), "tc_1", "replica-1", time.Time{}); err != nil {
		t.Fatalf("ClaimCall after restart: %v", err)
	}
	if err := s.WriteCalls(t.Context(), nil, []store.CallFinish{{ID: "tc_1", Status: store.CallSucceeded, Result: tool.TextResult("ran once")}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCall(t.Context(), "tc_1")
	if err != nil || got.Status != store.CallSucceeded || got.Result.Text() != "ran once" {
		t.Fatalf("call after restart = %+v, %v", got, err)
	}
}
