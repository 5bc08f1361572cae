package loadtest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestNotReadyWhileLeaseLapsed: a replica whose heartbeats have not gone through for
// longer than its lease has its calls failed by the other replicas, also the ones it
// starts before its next heartbeat (after a database outage longer than the lease,
// 6 of 24 calls sent in the first second were failed so). /readyz must then fail
// (check replica_lease), though the store answers and takes call records, and pass
// again once a heartbeat goes through. Here only the replicas table is locked.
func TestNotReadyWhileLeaseLapsed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL, _ := pgtest.Database(t)
	d := testdaemon.Start(t, func(c *config.Config) {
		c.Store = dbURL
		c.Cluster.Lease = 3 * time.Second // a heartbeat every second
	})
	ready := func() (int, map[string]string) { return readiness(ctx, t, d.URL) }
	if code, checks := ready(); code != http.StatusOK || checks["replica_lease"] != "ok" {
		t.Fatalf("/readyz before: %d %v; want 200 with replica_lease ok", code, checks)
	}

	locker, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE replicas IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var code int
	var checks map[string]string
	for i := 0; i < 40; i++ { // the lease is 3 s
		if code, checks = ready(); code == http.StatusServiceUnavailable {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(checks["replica_lease"], "more than its lease") ||
		checks["store"] != "ok" || checks["store_writes"] != "ok" {
		t.Errorf("/readyz with heartbeats blocked for 10 s: %d %v; want 503 with only replica_lease failing", code, checks)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		if code, checks = ready(); code == http.StatusOK {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if code != http.StatusOK {
		t.Errorf("/readyz 10 s after heartbeats went through again: %d %v; want 200", code, checks)
	}
}
