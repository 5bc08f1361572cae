package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestForwardedRequestKeepsItsRequestID: a read one replica forwards to the replica
// that ran the call answers one X-Request-Id, the one the first replica gave it (or
// the client's): an operator follows one id across both replicas' logs.
func TestForwardedRequestKeepsItsRequestID(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	var ownerLog syncBuffer
	a := startDaemon(t, daemonOpts{store: url, log: &ownerLog, mutate: func(c *config.Config) { c.ReplicaID = "replica-a" }})
	b := startDaemon(t, daemonOpts{store: url, mutate: func(c *config.Config) { c.ReplicaID = "replica-b" }})
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	code, _, out := a.do("POST", "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"echo hello-out"}}]}`)
	cid := messages(t, parseNDJSON(t, out))["x"].str("call_id")
	if code != 200 || cid == "" {
		t.Fatalf("the call on A: %d %s", code, out)
	}
	for _, tc := range []struct{ name, sent string }{{"made here", ""}, {"the client's", "req-forwarded-1"}} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.sent != "" {
				h.Set("X-Request-Id", tc.sent)
			}
			code, got, body := send(t, http.DefaultClient, "GET", b.url+"/v1/tool-calls/"+cid+"/progress", h, nil)
			if code != 200 || !strings.Contains(string(body), "hello-out") {
				t.Fatalf("progress through B of A's call: %d %s", code, body)
			}
			ids := got.Values("X-Request-Id")
			if len(ids) != 1 || ids[0] == "" || tc.sent != "" && ids[0] != tc.sent {
				t.Fatalf("X-Request-Id %q, want one id (%q when the client sent it)", ids, tc.sent)
			}
			// The owner logged the request under that id.
			if !strings.Contains(ownerLog.String(), `"request_id":"`+ids[0]+`"`) {
				t.Errorf("replica A's log has no line with request_id %s:\n%s", ids[0], ownerLog.String())
			}
		})
	}
}
