package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestCancelOnAnotherReplica: behind a Service, the cancel of a call reaches any
// replica. A call running on replica A, and one waiting on A for an approval, are
// cancelled by a POST …/cancel sent to replica B: A's streams get their cancelled
// results at once, the approval request is withdrawn, and
// the records say cancelled.
func TestCancelOnAnotherReplica(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Permissions.Allow = nil
		c.Sessions.WorkdirRoots = []string{shared}
	})
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": shared})["id"].(string)
	path := "/v1/sessions/" + id + "/tool-calls"

	cancelOnB := func(callID string, rest <-chan []event, tcid string) {
		t.Helper()
		start := time.Now()
		if code, _, body := b.do("POST", "/v1/tool-calls/"+callID+"/cancel", nil); code != http.StatusAccepted {
			t.Fatalf("cancel %s on B: %d %s", tcid, code, body)
		}
		select {
		case evs := <-rest:
			m := restMessages(t, evs)[tcid]
			if m.m["is_error"] != true || m.str("error_kind") != "cancelled" {
				t.Fatalf("%s on A's stream after the cancel on B: %s", tcid, m.raw)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: A's stream got no result %s after the cancel on B", tcid, time.Since(start))
		}
		t.Logf("%s: cancel on B → cancelled on A's stream in %s", tcid, time.Since(start).Round(time.Millisecond))
		code, _, body := b.do("GET", "/v1/tool-calls/"+callID, nil)
		var rec struct {
			Status    string `json:"status"`
			ErrorKind string `json:"error_kind"`
		}
		_ = json.Unmarshal(body, &rec)
		if code != 200 || rec.Status != "failed" || rec.ErrorKind != "cancelled" {
			t.Fatalf("%s record on B: %d %s", tcid, code, body)
		}
	}

	// Running on A.
	ev, rest, stop := streamUntilEvent(t, a, path, `{"calls":[{"id":"run","name":"execute_command","arguments":{"command":"sleep 30"}}]}`, "tool_start")
	defer stop()
	runID := ev["call_id"].(string)
	waitFor(t, 30*time.Second, "the call is recorded running", func() bool {
		code, _, body := b.do("GET", "/v1/tool-calls/"+runID, nil)
		return code == 200 && strings.Contains(string(body), `"status":"running"`)
	})
	cancelOnB(runID, rest, "run")

	// Waiting on A for an approval.
	ev, rest, stop2 := streamUntilEvent(t, a, path, `{"calls":[{"id":"ask","name":"execute_command","arguments":{"command":"echo ran > asked.txt"}}]}`, "approval_required")
	defer stop2()
	cancelOnB(ev["call_id"].(string), rest, "ask")
	code, _, body := b.do("GET", "/v1/approvals/"+ev["approval"].(map[string]any)["id"].(string), nil)
	if code != 200 || strings.Contains(string(body), `"status":"pending"`) {
		t.Fatalf("the approval of the cancelled call: %d %s", code, body)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(shared, "asked.txt")); err == nil {
		t.Error("asked.txt exists: the cancelled call ran")
	}
}
