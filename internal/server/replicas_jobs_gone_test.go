package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestJobOfStoppedReplicaAfterItIsForgotten: a background job runs on replica A,
// which stops cleanly (a redeploy); B's sweep then forgets A's row. The model's next
// await_job through B, and through A started again under its id, must say that the
// job ran on A and went with it, not "no job in this session", as if the model had
// made its id up.
func TestJobOfStoppedReplicaAfterItIsForgotten(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	opts := func(replica string) daemonOpts {
		return daemonOpts{store: url, mutate: func(c *config.Config) {
			c.ReplicaID = replica
			c.Cluster.Lease = 3 * time.Second
		}}
	}
	aData := t.TempDir()
	aOpts := opts("replica-a")
	aOpts.dataDir = aData
	a, b := startDaemon(t, aOpts), startDaemon(t, opts("replica-b"))
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command", "await_job", "read_job_output"}})["id"].(string)
	call := func(d *daemon, name, args string) event { t.Helper(); return keyedCall(t, d, "", id, name, args) }
	s := structuredOf(t, call(a, "execute_command", `{"command":"while :; do sleep 0.1; done","background":true}`))
	jobID, _ := s["job_id"].(string)
	if !strings.HasPrefix(jobID, "job_") {
		t.Fatalf("no job id: %v", s)
	}
	a.stop()

	waitForgotten(t, url, "replica-a")
	args := fmt.Sprintf(`{"job_id":%q,"timeout_ms":0}`, jobID)
	check := func(through string, m event) {
		t.Helper()
		if m.m["is_error"] != true || strings.Contains(string(m.raw), "no job") || !strings.Contains(string(m.raw), "replica-a") {
			t.Fatalf("await_job through %s of a job of the stopped replica A: %s; want an error saying it ran on replica-a and went with it", through, m.raw)
		}
	}
	check("B", call(b, "await_job", args))
	a = startDaemon(t, aOpts)
	check("A started again", call(a, "await_job", args))
	check("B, A back", call(b, "read_job_output", fmt.Sprintf(`{"job_id":%q}`, jobID)))
}

// waitForgotten waits until the other replicas' sweep has forgotten the stopped
// replica id (its row in the store of url is gone).
func waitForgotten(t *testing.T, url, id string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	waitFor(t, 60*time.Second, "the sweep to forget the stopped replica "+id, func() bool {
		var n int
		return conn.QueryRow(t.Context(), `SELECT count(*) FROM replicas WHERE id = $1`, id).Scan(&n) == nil && n == 0
	})
}
