package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestInterruptOnAnotherReplica: behind a Service, a session's interrupt lands on any
// replica. A sequential batch runs on replica A; the interrupt is sent to replica B
// while A runs the first call: the calls A has not started yet return skipped with the
// message, as when the interrupt reaches A itself.
func TestInterruptOnAnotherReplica(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command"} })
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	// B holds the session too, as a replica that served one of its requests does.
	if code, _, body := b.do("GET", "/v1/sessions/"+id+"/tools", nil); code != 200 {
		t.Fatalf("tools on B: %d %s", code, body)
	}
	_, rest, stop := streamUntilEvent(t, a, "/v1/sessions/"+id+"/tool-calls", `{"strategy":"sequential","calls":[
		{"id":"first","name":"execute_command","arguments":{"command":"sleep 2"}},
		{"id":"second","name":"execute_command","arguments":{"command":"echo second"}},
		{"id":"third","name":"execute_command","arguments":{"command":"echo third"}}]}`, "tool_start")
	defer stop()
	time.Sleep(200 * time.Millisecond) // the first call runs
	if code, _, body := b.do("POST", "/v1/sessions/"+id+"/interrupt", `{"message":"the user pressed stop"}`); code != 200 {
		t.Fatalf("interrupt on B: %d %s", code, body)
	}
	var evs []event
	select {
	case evs = <-rest:
	case <-time.After(30 * time.Second):
		t.Fatal("the batch on A never finished")
	}
	ms := restMessages(t, evs)
	if m := ms["first"]; m.m["is_error"] != false {
		t.Errorf("the running call: %s", m.raw)
	}
	for _, tc := range []string{"second", "third"} {
		m := ms[tc]
		if m.str("error_kind") != "skipped" || !strings.Contains(string(m.raw), "the user pressed stop") {
			t.Errorf("%s, not started when B was interrupted: %s", tc, m.raw)
		}
	}
}
