package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestBackgroundResultAfterLostNotification: a background call of a session finished
// on replica A while a stream of the session is open on replica B, and the
// notification that would have told B was lost (here: never sent; in life, sent
// while B's listener connection was down). When B's listener reconnects it re-reads
// the session's records, so the stream on B still gets the call's tool_result.
func TestBackgroundResultAfterLostNotification(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, nil)
	id := a.createSession(map[string]any{"available_tools": []string{"bg_sleep"}})["id"].(string)
	onB := sessionEventLines(t, b, id)

	// A's record of the finished call, with no notification.
	now := time.Now().UTC()
	rec := &store.Call{ID: "tc_lostnotification", SessionID: id, Tenant: "default", ToolCallID: "lost", Name: "bg_sleep",
		Arguments: json.RawMessage(`{"ms":1}`), Status: store.CallSucceeded, Result: tool.TextResult("slept while B was deaf"),
		Owner: "replica-a", CreatedAt: now, StartedAt: &now, FinishedAt: &now}
	if err := a.app.Store.WriteCalls(t.Context(), []*store.Call{rec}, nil); err != nil {
		t.Fatal(err)
	}

	dropListeners(t, b)
	if l := lineOfType(t, onB, "tool_result"); !bytes.Contains(l, []byte(rec.ID)) || !bytes.Contains(l, []byte("slept while B was deaf")) {
		t.Fatalf("tool_result on B: %s", l)
	}
}

// dropListeners ends the replicas' LISTEN connections (A's and B's: they LISTEN
// alike) and waits for b's to reconnect.
func dropListeners(t *testing.T, b *daemon) {
	t.Helper()
	n, ok := b.app.Notifier.(*store.PGNotifier)
	if !ok {
		t.Fatalf("replica B's notifier is a %T", b.app.Notifier)
	}
	before := n.Reconnects()
	conn, err := pgx.Connect(t.Context(), b.app.Config.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var killed int
	if err := conn.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1`,
		"LISTEN "+pgx.Identifier{n.Channel()}.Sanitize()).Scan(&killed); err != nil || killed != 2 {
		t.Fatalf("terminating the replicas' listeners: %d backends, %v; want 2", killed, err)
	}
	waitFor(t, 30*time.Second, "B's listener to reconnect", func() bool { return n.Reconnects() > before && n.Listening() })
}

// lineOfType returns the first line of the stream lines whose type is typ, failing
// after 15 s without one.
func lineOfType(t *testing.T, lines <-chan timedLine, typ string) []byte {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case l := <-lines:
			if bytes.Contains(l.line, []byte(`"type":"`+typ+`"`)) {
				return l.line
			}
		case <-deadline:
			t.Fatalf("no %s on B's stream after B's listener reconnected", typ)
		}
	}
}

// TestBackgroundApprovalAfterLostNotification: a background call on replica A asks
// for approval while a stream of its session is open on replica B, and the
// notification that would have told B was lost. B re-read the results of such calls
// when its listener reconnected, but not their approval requests: B's stream never
// showed approval_required, and the call waited for a decision no one was asked for.
func TestBackgroundApprovalAfterLostNotification(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, nil)
	id := a.createSession(map[string]any{"available_tools": []string{"bg_sleep"}})["id"].(string)
	onB := sessionEventLines(t, b, id)

	// A's records of the call and its approval request, with no notification.
	now := time.Now().UTC()
	rec := &store.Call{ID: "tc_lostapproval", SessionID: id, Tenant: "default", ToolCallID: "asks", Name: "bg_sleep",
		Arguments: json.RawMessage(`{"ms":1}`), Status: store.CallRunning, Owner: "replica-a", CreatedAt: now, StartedAt: &now}
	if err := a.app.Store.WriteCalls(t.Context(), []*store.Call{rec}, nil); err != nil {
		t.Fatal(err)
	}
	exp := now.Add(time.Hour)
	apr := &store.Approval{ID: "apr_lostnotification", CallID: rec.ID, Arguments: rec.Arguments, Risk: tool.RiskMedium,
		Reason: "asked while B was deaf", CreatedAt: now, ExpiresAt: &exp}
	aps, ok := a.app.Store.(interface {
		CreateApproval(context.Context, *store.Approval) error
	})
	if !ok {
		t.Fatalf("replica A's store is a %T", a.app.Store)
	}
	if err := aps.CreateApproval(t.Context(), apr); err != nil {
		t.Fatal(err)
	}

	dropListeners(t, b)
	if l := lineOfType(t, onB, "approval_required"); !bytes.Contains(l, []byte(apr.ID)) || !bytes.Contains(l, []byte(rec.ID)) {
		t.Fatalf("approval_required on B: %s", l)
	}
}
