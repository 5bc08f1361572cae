package store

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/toolserverd/toolserverd/internal/leakcheck"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

const notifyTestWait = 10 * time.Second

func startPGNotifier(t *testing.T, u string) *PGNotifier {
	t.Helper()
	n, err := NewPGNotifierWithConfig(t.Context(), PGNotifierConfig{URL: u, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewPGNotifier: %v", err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(n.Stop)
	return n
}

func receiveNote(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case p, ok := <-ch:
		if !ok {
			t.Fatal("subscription closed")
		}
		return p
	case <-time.After(notifyTestWait):
		t.Fatal("no notification within the wait limit")
	}
	return ""
}

// terminateListener kills n's listener connection from the server side.
func terminateListener(t *testing.T, u string, n *PGNotifier) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, int32(n.pid.Load())).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", n.pid.Load(), ok, err)
	}
}

// TestPGNotifierReconnects: when the listener's connection is killed, the notifier
// reconnects, LISTENs again, tells every subscriber to re-check (an empty payload), and
// notifications flow again.
func TestPGNotifierReconnects(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	a, b := startPGNotifier(t, u), startPGNotifier(t, u)
	calls, stop := b.Subscribe(TopicCall)
	defer stop()
	approvals, stop2 := b.Subscribe(TopicApproval)
	defer stop2()
	if !b.Listening() {
		t.Fatalf("not listening after Start")
	}
	for round := 1; round <= 2; round++ {
		oldPID := b.pid.Load()
		terminateListener(t, u, b)
		for _, ch := range []<-chan string{calls, approvals} {
			if got := receiveNote(t, ch); got != "" {
				t.Fatalf("round %d: first payload after the reconnect = %q, want the empty re-check payload", round, got)
			}
		}
		if b.Reconnects() != uint64(round) || !b.Listening() || b.pid.Load() == oldPID {
			t.Errorf("round %d: reconnects %d listening %v pid %d (was %d)", round, b.Reconnects(), b.Listening(), b.pid.Load(), oldPID)
		}
		if err := a.Notify(t.Context(), TopicCall, "tc_after"); err != nil {
			t.Fatal(err)
		}
		if got := receiveNote(t, calls); got != "tc_after" {
			t.Errorf("round %d: after reconnect got %q, want tc_after", round, got)
		}
		// b's own notifications reach b's subscribers too.
		if err := b.Notify(t.Context(), TopicApproval, "apr_self"); err != nil {
			t.Fatal(err)
		}
		if got := receiveNote(t, approvals); got != "apr_self" {
			t.Errorf("round %d: own notification got %q, want apr_self", round, got)
		}
	}
}

// TestPGNotifierPingsQuietConnection: a quiet listener checks its connection every
// PingInterval and keeps it (no reconnect) while it answers.
func TestPGNotifierPingsQuietConnection(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	n, err := NewPGNotifierWithConfig(t.Context(), PGNotifierConfig{URL: u, PingInterval: 50 * time.Millisecond, MinBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	ch, stop := n.Subscribe(TopicCall)
	defer stop()
	time.Sleep(300 * time.Millisecond) // several quiet intervals, each ending in a ping
	if n.Reconnects() != 0 || !n.Listening() {
		t.Fatalf("a quiet, healthy connection was replaced: reconnects %d listening %v", n.Reconnects(), n.Listening())
	}
	if err := n.Notify(t.Context(), TopicCall, "tc_1"); err != nil {
		t.Fatal(err)
	}
	if got := receiveNote(t, ch); got != "tc_1" {
		t.Errorf("got %q, want tc_1", got)
	}
}

// TestPGNotifierSchemas: the default channel belongs to the schema, so deployments in
// separate schemas of one database do not wake each other.
func TestPGNotifierSchemas(t *testing.T) {
	t.Parallel()
	u1, u2 := pgtest.URL(t), pgtest.URL(t)
	n1, n2 := startPGNotifier(t, u1), startPGNotifier(t, u2)
	if n1.Channel() == n2.Channel() || !strings.HasPrefix(n1.Channel(), "toolserverd.pgtest_") {
		t.Fatalf("channels %q and %q, want one per schema", n1.Channel(), n2.Channel())
	}
	ch, stop := n2.Subscribe(TopicCall)
	defer stop()
	if err := n1.Notify(t.Context(), TopicCall, "other schema"); err != nil {
		t.Fatal(err)
	}
	if err := n2.Notify(t.Context(), TopicCall, "marker"); err != nil {
		t.Fatal(err)
	}
	if got := receiveNote(t, ch); got != "marker" {
		t.Errorf("first payload = %q, want marker (nothing from the other schema)", got)
	}
	// An explicit channel is shared whatever the schema.
	var ns []*PGNotifier
	for _, u := range []string{u1, u2} {
		n, err := NewPGNotifierWithConfig(t.Context(), PGNotifierConfig{URL: u, Channel: "shared_" + n1.Channel()[len("toolserverd.pgtest_"):]})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
		ns = append(ns, n)
	}
	ch2, stop2 := ns[1].Subscribe(TopicApproval)
	defer stop2()
	if err := ns[0].Notify(t.Context(), TopicApproval, "apr_1"); err != nil {
		t.Fatal(err)
	}
	if got := receiveNote(t, ch2); got != "apr_1" {
		t.Errorf("explicit channel: got %q, want apr_1", got)
	}
	if got := notifyChannelFor(strings.Repeat("s", 60)); len(got) > 63 || !strings.HasPrefix(got, "toolserverd.") {
		t.Errorf("channel for a long schema = %q, want at most 63 bytes", got)
	}
}

func TestPGNotifierLifecycle(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	n, err := NewPGNotifier(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); !errors.Is(err, ErrNotifierStopped) {
		t.Errorf("second Start: %v, want ErrNotifierStopped", err)
	}
	ch, stop := n.Subscribe(TopicCall)
	n.Stop()
	n.Stop()
	if n.Listening() {
		t.Errorf("Listening after Stop")
	}
	if err := n.Notify(t.Context(), TopicCall, "x"); !errors.Is(err, ErrNotifierStopped) {
		t.Errorf("Notify after Stop: %v, want ErrNotifierStopped", err)
	}
	if err := n.Start(t.Context()); !errors.Is(err, ErrNotifierStopped) {
		t.Errorf("Start after Stop: %v, want ErrNotifierStopped", err)
	}
	select {
	case p := <-ch:
		t.Errorf("payload %q after Stop", p)
	default:
	}
	stop()

	// Stop without Start; a cancelled Start context stops the listener.
	n2, err := NewPGNotifier(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	n2.Stop()
	n3, err := NewPGNotifier(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	if err := n3.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-n3.done:
	case <-time.After(notifyTestWait):
		t.Errorf("listener still running after its Start context ended")
	}
	n3.Stop()

	// Refusals.
	if _, err := NewPGNotifier(t.Context(), "postgres://127.0.0.1:1/x?connect_timeout=2"); err == nil {
		t.Errorf("NewPGNotifier on a closed port succeeded")
	}
	bad, _ := url.Parse(u)
	q := bad.Query()
	q.Set("search_path", "nope_"+q.Get("search_path"))
	bad.RawQuery = q.Encode()
	if n, err := NewPGNotifier(t.Context(), bad.String()); err == nil {
		n.Stop()
		t.Errorf("NewPGNotifier with a missing schema succeeded")
	}
	for _, c := range []PGNotifierConfig{
		{},
		{URL: u, Channel: strings.Repeat("c", 64)},
		{URL: u, Buffer: -1},
		{URL: u, MinBackoff: time.Second, MaxBackoff: time.Millisecond},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", c)
		}
	}
}

// TestPGNotifierNoGoroutineLeak runs alone (not parallel): after Stop, nothing the
// notifier started is left, reconnections included.
func TestPGNotifierNoGoroutineLeak(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	u := pgtest.URL(t)
	n, err := NewPGNotifierWithConfig(t.Context(), PGNotifierConfig{URL: u, MinBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ch, stop := n.Subscribe(TopicApproval)
	terminateListener(t, u, n)
	if got := receiveNote(t, ch); got != "" {
		t.Fatalf("got %q, want the re-check payload", got)
	}
	if err := n.Notify(t.Context(), TopicApproval, "apr_1"); err != nil {
		t.Fatal(err)
	}
	if got := receiveNote(t, ch); got != "apr_1" {
		t.Fatalf("got %q, want apr_1", got)
	}
	stop()
	n.Stop()
}
