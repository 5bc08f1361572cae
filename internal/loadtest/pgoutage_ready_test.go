package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestReadyAgainWithoutTraffic: on PostgreSQL, after the database refused a call
// record (here closed to connections for a moment) every replica's /readyz fails
// (store_writes). A load balancer then sends it no call, so no call record is written
// to clear that; the replica's own heartbeat, a write to the same database, must make
// it ready again once the database takes writes, rather than the 30 s window after
// the refusal (during which every replica stayed out of service with the database
// well).
func TestReadyAgainWithoutTraffic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL, admin := pgtest.Database(t)
	u, err := url.Parse(dbURL)
	fatalIf(t, err)
	db := strings.TrimPrefix(u.Path, "/")
	d := testdaemon.Start(t, func(c *config.Config) {
		c.Store = dbURL
		c.Cluster.Lease = 3 * time.Second // a heartbeat every second
	})
	c, tr := newClient(d.URL, 2)
	defer tr.CloseIdleConnections()
	sess, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	fatalIf(t, err)
	run := func(id string) client.Event {
		var msg client.Event
		_ = c.Run(ctx, sess.ID, "", client.Batch{Calls: []client.Call{{ID: id, Name: "execute_command",
			Arguments: json.RawMessage(`{"command":"echo hi"}`)}}}, func(ev client.Event) error {
			if ev.Type == "message" {
				msg = ev
			}
			return nil
		})
		return msg
	}
	if m := run("before"); m.IsError {
		t.Fatalf("call before the outage: %s %s", m.ErrorKind, m.Content())
	}
	ready := func() (int, string) {
		code, checks := readiness(ctx, t, d.URL)
		return code, checks["store_writes"]
	}

	if _, err := admin.Exec(ctx, "ALTER DATABASE "+db+" ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	refused := false
	for i := 0; i < 50 && !refused; i++ {
		if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", db); err != nil {
			t.Fatal(err)
		}
		if m := run(fmt.Sprintf("during%d", i)); m.ErrorKind != "unavailable" {
			t.Logf("call %d while connections are barred: %q %s", i, m.ErrorKind, m.Content())
			continue
		}
		_, w := ready()
		refused = strings.Contains(w, "cannot be written")
	}
	if !refused {
		t.Fatal("no call record was refused while the database was closed to connections")
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+db+" ALLOW_CONNECTIONS true"); err != nil {
		t.Fatal(err)
	}
	// No call from here on: only /readyz, as a load balancer's probe. The refusal
	// window is 30 s; heartbeats come every second.
	var code int
	var w string
	for i := 0; i < 40; i++ {
		if code, w = ready(); code == http.StatusOK {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if code != http.StatusOK {
		t.Fatalf("/readyz 20 s after the database took connections again, with heartbeats written meanwhile: %d, store_writes %q; want 200", code, w)
	}
	if m := run("after"); m.IsError {
		t.Fatalf("call after the outage: %s %s", m.ErrorKind, m.Content())
	}
}
