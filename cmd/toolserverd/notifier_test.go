package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestNotifierLossIsLogged: when PostgreSQL drops the connection the replica LISTENs
// on (a failover, an idle-connection killer), notifications sent meanwhile are lost
// (approval decisions, MCP server changes of the other replicas: each waits for its
// periodic re-read). The daemon says so, and says when it listens again; its log used
// to say nothing at all.
func TestNotifierLossIsLogged(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary")
	}
	store, admin := pgtest.Database(t)
	u, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	bin := buildBinary(t)
	p := startWaiting(t, bin, store)
	p.next(t, 60*time.Second, "toolserverd listening")

	// Every connection of the daemon's database goes: its pools reconnect on their
	// own, the listener through the notifier's backoff.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, db); err != nil {
		t.Fatal(err)
	}
	lost := p.next(t, 60*time.Second, "notifier: listener connection lost; reconnecting")
	if lost["level"] != "WARN" {
		t.Errorf("the lost connection is logged at %v, want WARN: %v", lost["level"], lost)
	}
	p.next(t, 60*time.Second, "notifier: listening again")
}
