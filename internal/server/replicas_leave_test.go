package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestStoppedReplicaLeaves: replica A finishes a call and stops cleanly (drain,
// close). Its lease (a minute) has not run out, yet A is gone for good: reads through
// B of the call's output were 503 "owner unreachable" until the lease ran out. A
// gives up its row on a clean stop, so B answers them at once from the record, as
// for a dead replica.
func TestStoppedReplicaLeaves(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) { c.Cluster.Lease = time.Minute })
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	code, _, out := a.do("POST", "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"echo hello-out"}}]}`)
	msg := messages(t, parseNDJSON(t, out))["x"]
	cid := msg.str("call_id")
	if code != 200 || cid == "" || !strings.Contains(string(msg.raw), "hello-out") {
		t.Fatalf("the call on A: %d %s", code, out)
	}
	a.stop()

	code, _, body := b.do("GET", "/v1/tool-calls/"+cid+"/progress", nil)
	var p struct {
		progressRead
		OutputLost bool `json:"output_lost"`
	}
	if code != 200 || json.Unmarshal(body, &p) != nil || !p.Finished || !p.OutputLost {
		t.Errorf("progress on B of a finished call of a replica that stopped cleanly: %d %s; want the record's answer (finished), its output said to be lost", code, body)
	}
	code, _, body = b.do("GET", "/v1/tool-calls/"+cid+"/events", nil)
	if code != 200 || !strings.Contains(string(body), "hello-out") {
		t.Errorf("events on B of a finished call of a replica that stopped cleanly: %d %s; want its message from the record", code, body)
	}
}
