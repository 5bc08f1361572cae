package retention_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolserverd/toolserverd/internal/retention"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

func deletedTotal(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "toolserverd_retention_deleted_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no toolserverd_retention_deleted_total{kind=%q}", kind)
	return 0
}

// TestSweep: one sweep deletes every call record past retention.calls, more than
// one batch of them, and the unused sessions with their workspaces; it keeps what is
// recent, and counts what went.
func TestSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.OpenSQLite(ctx, filepath.Join(dir, "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := session.NewManager(session.Config{WorkspaceDir: filepath.Join(dir, "workspaces")}, st, toolmgr.New())
	if err != nil {
		t.Fatal(err)
	}
	m.UseRetention(st, 24*time.Hour)
	sess, _, err := m.Create(ctx, "t1", session.Spec{})
	if err != nil {
		t.Fatal(err)
	}

	now := time.Now().UTC()
	old := now.Add(-48 * time.Hour)
	const due = store.RetentionBatch*2 + 7
	var calls []*store.Call
	for i := range due + 3 {
		finished := old
		if i >= due {
			finished = now.Add(-time.Hour) // within the retention
		}
		calls = append(calls, &store.Call{ID: fmt.Sprintf("tc_%05d", i), SessionID: "ses_elsewhere", Tenant: "t1",
			ToolCallID: fmt.Sprintf("call_%d", i), Name: "read_file", Arguments: json.RawMessage(`{}`),
			Status: store.CallSucceeded, Result: tool.TextResult("ok"), CreatedAt: finished, FinishedAt: &finished})
	}
	if err := st.WriteCalls(ctx, calls, nil); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	sw, err := retention.New(retention.Config{Calls: 24 * time.Hour, Sessions: 24 * time.Hour}, st, m, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, s, err := sw.Sweep(ctx, now); err != nil || c != due || s != 0 {
		t.Fatalf("Sweep now = %d calls, %d sessions, %v; want %d, 0", c, s, err, due)
	}
	left, err := st.ListCalls(ctx, "ses_elsewhere", store.CallPage{})
	if err != nil || len(left) != 3 {
		t.Fatalf("%d calls left (%v), want the 3 recent ones", len(left), err)
	}
	// Two days on the session has not been used for the retention either.
	c, s, err := sw.Sweep(ctx, now.Add(48*time.Hour))
	if err != nil || s != 1 || c != 3 {
		t.Fatalf("Sweep later = %d calls, %d sessions, %v; want 3, 1", c, s, err)
	}
	if _, err := os.Stat(sess.Info.Workdir); !os.IsNotExist(err) {
		t.Errorf("workspace %s: %v, want it removed", sess.Info.Workdir, err)
	}
	if got := deletedTotal(t, reg, "calls"); got != due+3 {
		t.Errorf("calls counter = %v, want %d", got, due+3)
	}
	if got := deletedTotal(t, reg, "sessions"); got != 1 {
		t.Errorf("sessions counter = %v, want 1", got)
	}
}

// TestStartStop: with nothing to delete no sweeper starts; otherwise Start runs one
// until Stop, which is idempotent, and a second Start is refused.
func TestStartStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	off, err := retention.New(retention.Config{}, st, nil, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Start(ctx); err != nil {
		t.Fatal(err)
	}
	off.Stop()
	sw, err := retention.New(retention.Config{Calls: time.Hour}, st, nil, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sw.Start(ctx); err == nil {
		t.Error("a second Start was accepted")
	}
	sw.Stop()
	sw.Stop()
	if _, err := retention.New(retention.Config{Calls: -time.Hour}, st, nil, nil, nil); err == nil {
		t.Error("a negative retention was accepted")
	}
	if _, err := retention.New(retention.Config{Sessions: time.Hour}, st, nil, nil, nil); err == nil {
		t.Error("sessions retention without a session manager was accepted")
	}
}
