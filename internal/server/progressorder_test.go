package server_test

import (
	"fmt"
	"testing"
)

// A UI that draws a call when its tool_start arrives must never get the call's
// output first. await_job of a running job publishes the output the job printed so
// far the moment it starts, which raced the tool_start line to the stream's writer:
// about one await_job in three showed its tool_progress before its tool_start.
func TestProgressNeverBeforeStart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command", "await_job"}})["id"].(string)
	for round := range 12 {
		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"bg","name":"execute_command","arguments":{"command":"echo out; sleep 0.3","background":true}}]}`)
		job := messages(t, evs)["bg"].m["message"].(map[string]any)["structured"].(map[string]any)["job_id"].(string)
		_, evs = d.stream("/v1/sessions/"+id+"/tool-calls", fmt.Sprintf(`{"calls":[{"id":"aw","name":"await_job","arguments":{"job_id":%q,"timeout_ms":10000}}]}`, job))
		started := false
		for _, e := range evs {
			switch e.str("type") {
			case "tool_start":
				started = true
			case "tool_progress":
				if !started {
					t.Fatalf("round %d: tool_progress before the call's tool_start: %s", round, e.raw)
				}
			}
		}
		messages(t, evs)
	}
}
