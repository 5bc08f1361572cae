package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestLateSuccessAfterLeaseTakenOver: replica A runs a command; its heartbeats fail
// (a CHECK constraint refuses its row's update), and replica B, whose lease is short,
// marks A's call failed. A's lease is long, so A has not fenced itself yet when the
// command then ends well. A's result cannot be recorded (the record is final). Before,
// A's client was told success while the record said failed, and nothing was logged.
// Now A logs a WARN naming the call, tool and session, counts it, and its client's
// stream says what the record says (is_error, failed, B's reason) with a note and the
// unrecorded output after it.
func TestLateSuccessAfterLeaseTakenOver(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	shared := t.TempDir()
	var logA syncBuffer
	a := startDaemon(t, daemonOpts{store: url, log: &logA, mutate: func(c *config.Config) {
		c.ReplicaID = "replica-a"
		c.Sessions.WorkdirRoots = []string{shared}
		c.Cluster.Lease = 5 * time.Minute
	}})
	b := startDaemon(t, daemonOpts{store: url, mutate: func(c *config.Config) {
		c.ReplicaID = "replica-b"
		c.Sessions.WorkdirRoots = []string{shared}
		c.Cluster.Lease = time.Second
	}})
	sid := a.createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": shared})["id"].(string)
	// B must not fail the call before it runs: A's heartbeats are refused only once it does.
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())

	result := make(chan []byte, 1)
	go func() {
		defer close(result)
		body := `{"calls":[{"id":"late","name":"execute_command","arguments":{"command":"while [ ! -f go ]; do sleep 0.05; done; echo late-output-kept","timeout_ms":120000}}],"timeout_ms":120000}`
		resp, err := http.Post(a.url+"/v1/sessions/"+sid+"/tool-calls", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		result <- out
	}()
	waitFor(t, 60*time.Second, "the call running on A", func() bool {
		_, _, body := b.do("GET", "/v1/sessions/"+sid+"/tool-calls/late", nil)
		return strings.Contains(string(body), `"running"`)
	})
	if _, err := conn.Exec(t.Context(), `ALTER TABLE replicas ADD CONSTRAINT refuse_replica_a CHECK (id <> 'replica-a') NOT VALID`); err != nil {
		t.Fatal(err)
	}
	var callID string
	waitFor(t, 60*time.Second, "B failing A's call", func() bool {
		_, _, body := b.do("GET", "/v1/sessions/"+sid+"/tool-calls/late", nil)
		var rec struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		_ = json.Unmarshal(body, &rec)
		callID = rec.ID
		return rec.Status == "failed"
	})
	if err := os.WriteFile(filepath.Join(shared, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out []byte
	select {
	case out = <-result:
	case <-time.After(90 * time.Second):
		t.Fatal("A's call did not end")
	}
	m := messages(t, parseNDJSON(t, out))["late"]
	text := string(m.raw)
	if m.m["is_error"] != true || m.m["error_kind"] != "failed" {
		t.Errorf("A's stream: %s; want what the record says, is_error true and error_kind failed", text)
	}
	for _, want := range []string{"replica replica-a stopped answering", "Not recorded", "late-output-kept"} {
		if !strings.Contains(text, want) {
			t.Errorf("A's stream: %s; want it to hold %q", text, want)
		}
	}
	_, _, rec := b.do("GET", "/v1/tool-calls/"+callID, nil)
	var r struct {
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal(rec, &r)
	if r.Status != "failed" || strings.Contains(string(r.Result), "late-output-kept") {
		t.Errorf("the record after A's late result: %s; want B's failed record kept", rec)
	}
	var warned bool
	for _, line := range strings.Split(logA.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "call result not recorded") &&
			strings.Contains(line, `"call_id":"`+callID+`"`) && strings.Contains(line, `"tool":"execute_command"`) &&
			strings.Contains(line, `"session_id":"`+sid+`"`) && strings.Contains(line, `"dropped_status":"succeeded"`) &&
			strings.Contains(line, `"record_status":"failed"`) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("A logged no WARN naming the unrecorded result of %s:\n%s", callID, grepLines(logA.String(), callID))
	}
	_, _, metrics := a.do("GET", "/metrics", nil)
	if !strings.Contains(string(metrics), "\ntoolserverd_store_call_results_not_recorded_total 1\n") {
		t.Errorf("A's /metrics:\n%s", grepLines(string(metrics), "not_recorded"))
	}
}
