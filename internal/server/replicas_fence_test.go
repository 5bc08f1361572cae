package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestReplicaFencesItselfOnLostLease: replica A runs a long command; then its
// heartbeats start failing for real (a CHECK constraint refuses its row's update,
// while every other query of A still works). Survivor B, with a shorter lease, fails
// A's call; A, once its own lease has passed without a heartbeat, cancels the call
// (its stream gets an error result instead of running on for minutes), and its late
// result does not replace the survivor's failed record.
func TestReplicaFencesItselfOnLostLease(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	shared := t.TempDir()
	opts := func(replica string, lease time.Duration) daemonOpts {
		return daemonOpts{store: url, mutate: func(c *config.Config) {
			c.ReplicaID = replica
			c.Sessions.WorkdirRoots = []string{shared}
			c.Cluster.Lease = lease
		}}
	}
	a := startDaemon(t, opts("replica-a", 5*time.Second))
	b := startDaemon(t, opts("replica-b", time.Second))
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": shared})["id"].(string)

	result := make(chan []byte, 1)
	postErr := make(chan error, 1)
	go func() {
		defer close(result)
		body := `{"calls":[{"id":"long","name":"execute_command","arguments":{"command":"sleep 300","timeout_ms":600000}}],"timeout_ms":600000}`
		resp, err := http.Post(a.url+"/v1/sessions/"+id+"/tool-calls", "application/json", strings.NewReader(body))
		if err != nil {
			postErr <- err
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		result <- out
	}()
	// On a timeout, say what B and A last answered (it failed once, under a loaded CI
	// run, with nothing to go on).
	var seenB, seenA string
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, _, body := b.do("GET", "/v1/sessions/"+id+"/tool-calls/long", nil)
		if code == 200 && strings.Contains(string(body), `"running"`) {
			break
		}
		seenB = fmt.Sprintf("%d %s", code, body)
		select {
		case err := <-postErr:
			t.Fatalf("posting the long call to A: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			code, _, body := a.do("GET", "/v1/sessions/"+id+"/tool-calls/long", nil)
			seenA = fmt.Sprintf("%d %s", code, body)
			t.Fatalf("the long call was not seen running on A within 60 s: B answered %s; A answers %s", seenB, seenA)
		}
		time.Sleep(20 * time.Millisecond)
	}

	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), `ALTER TABLE replicas ADD CONSTRAINT fence_replica_a CHECK (id <> 'replica-a') NOT VALID`); err != nil {
		t.Fatal(err)
	}

	// B fails the call once its own (shorter) lease has passed; A fences itself
	// after its own.
	waitFor(t, 60*time.Second, "B failing A's call", func() bool {
		_, _, body := b.do("GET", "/v1/sessions/"+id+"/tool-calls/long", nil)
		return strings.Contains(string(body), `"failed"`)
	})
	// A's call is counted by B, which failed it: A, were it killed, never would.
	// B's sweep counts the call after writing its record, so the count may lag it.
	var metrics []byte
	counted := func() bool {
		_, _, metrics = b.do("GET", "/metrics", nil)
		return strings.Contains(string(metrics), "\ntoolserverd_replica_expired_calls_total 1\n")
	}
	countBy := time.Now().Add(10 * time.Second)
	for !counted() && time.Now().Before(countBy) {
		time.Sleep(50 * time.Millisecond)
	}
	if !counted() {
		t.Errorf("B's /metrics does not count A's expired call:\n%s", grepLines(string(metrics), "expired"))
	}
	var out []byte
	select {
	case out = <-result:
	case <-time.After(90 * time.Second):
		t.Fatal("A did not stop its call after losing its lease")
	}
	if out == nil {
		t.Fatal("the call could not be posted to A")
	}
	m := messages(t, parseNDJSON(t, out))["long"]
	// The stream says what the record says: the call failed because A lost its lease
	// (not "cancelled", which reads as if someone had cancelled it).
	if m.m["is_error"] != true || m.m["error_kind"] != "failed" ||
		!strings.Contains(string(m.raw), "lost its lease") || !strings.Contains(string(m.raw), "may have run partly") {
		t.Fatalf("A's result of the fenced call: %s", m.raw)
	}
	_, _, rec := b.do("GET", "/v1/sessions/"+id+"/tool-calls/long", nil)
	if !strings.Contains(string(rec), `"failed"`) || !strings.Contains(string(rec), "replica replica-a stopped answering") {
		t.Fatalf("the record after A's late result: %s", rec)
	}
}
