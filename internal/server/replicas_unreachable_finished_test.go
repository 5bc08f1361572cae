package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestFinishedCallOwnerUnreachable: a call finished on replica A, whose advertised
// address cannot be reached while A is alive (its lease holds). Its output is in A's
// data_dir, so a progress read through B (poll or SSE) read as finished with no
// data, which a client cannot tell from "printed nothing"; it is 503 unavailable with
// Retry-After, naming A and where the result is. The result itself is durable: the
// call's record and its events replay serve it from B.
func TestFinishedCallOwnerUnreachable(t *testing.T) {
	t.Parallel()
	closed := "http://" + closedAddr(t)
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Cluster.Lease = time.Minute
		if c.ReplicaID == "replica-a" {
			c.Cluster.AdvertiseURL = closed
		}
	})
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	code, _, out := a.do("POST", "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"echo hello-out"}}]}`)
	msg := messages(t, parseNDJSON(t, out))["x"]
	cid := msg.str("call_id")
	if code != 200 || cid == "" || !strings.Contains(string(msg.raw), "hello-out") {
		t.Fatalf("the call on A: %d %s", code, out)
	}

	wantProgressUnavailable(t, b, cid, "of a finished call, its owner alive and unreachable", "replica-a", "/v1/tool-calls/"+cid)
	for _, path := range []string{"/v1/tool-calls/" + cid, "/v1/tool-calls/" + cid + "/events"} {
		if code, _, body := b.do("GET", path, nil); code != 200 || !strings.Contains(string(body), "hello-out") {
			t.Errorf("GET %s on B: %d %s; want the result from the record", path, code, body)
		}
	}
	// The owner itself serves the output.
	if code, _, body := a.do("GET", "/v1/tool-calls/"+cid+"/progress", nil); code != 200 || !strings.Contains(string(body), `"data":"hello-out\n"`) {
		t.Errorf("progress on A: %d %s", code, body)
	}
}
