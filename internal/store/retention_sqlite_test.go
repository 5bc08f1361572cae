package store_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestDeleteFinishedCallsLeavesTheWriterFree: SQLite has one writer, and the call
// records' group commit needs it. Finding the due calls walks every tenant (an index
// probe or two each: seconds with tens of thousands of tenants), and must not hold
// the write lock meanwhile, so that call records are not kept waiting, nor fail their
// write timeout, at every sweep. Here nothing is due: a second connection that asks
// for the write lock without waiting (busy_timeout 0) must always get it while the
// sweep looks.
func TestDeleteFinishedCallsLeavesTheWriterFree(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "toolserverd.db")
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const tenants = 2000
	recent := time.Now().Add(-time.Hour).UTC()
	for b := 0; b < tenants; b += 1000 {
		var calls []*store.Call
		for i := b; i < b+1000; i++ {
			calls = append(calls, &store.Call{ID: fmt.Sprintf("tc_%05d", i), SessionID: "ses_1", Tenant: fmt.Sprintf("tenant%05d", i),
				ToolCallID: "c", Name: "read_file", Arguments: json.RawMessage(`{}`), Status: store.CallSucceeded,
				Result: tool.TextResult("ok"), CreatedAt: recent, FinishedAt: &recent})
		}
		if err := s.WriteCalls(ctx, calls, nil); err != nil {
			t.Fatal(err)
		}
	}
	probe, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	probe.SetMaxOpenConns(1)
	if tx, err := probe.BeginTx(ctx, nil); err != nil {
		t.Fatalf("the probe cannot take the write lock of an idle store: %v", err)
	} else if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, _, err := s.DeleteFinishedCalls(ctx, time.Now().Add(-24*time.Hour), "", 0)
		done <- result{n, err}
	}()
	tries, locked := 0, 0
	for {
		select {
		case r := <-done:
			if r.err != nil || r.n != 0 {
				t.Fatalf("DeleteFinishedCalls = %d, %v; want 0, nothing is due", r.n, r.err)
			}
			if locked > 0 {
				t.Fatalf("the write lock was held while the sweep looked for due calls: %d of %d tries to take it failed", locked, tries)
			}
			return
		default:
		}
		tries++
		if tx, err := probe.BeginTx(ctx, nil); err != nil {
			locked++
		} else if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // leave the sweep the CPU
	}
}
