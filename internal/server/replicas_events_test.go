package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestCallEventsOnAnotherReplica: GET /v1/tool-calls/{id}/events replays a call with
// its output so far and follows it to its result, also when the request reaches a
// replica other than the one running the call (the call's output is in that
// replica's data_dir): the follower on B gets A's output, byte for byte, then the
// message and done.
func TestCallEventsOnAnotherReplica(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command"} })
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	ev, rest, stop := streamUntilEvent(t, a, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"echo before; sleep 1; echo after"}}]}`, "tool_progress")
	defer stop()
	callID := ev["call_id"].(string)

	start := time.Now()
	code, _, body := b.do("GET", "/v1/tool-calls/"+callID+"/events", nil)
	if code != 200 {
		t.Fatalf("events on B: %d %s", code, body)
	}
	evs := parseNDJSON(t, body)
	var out strings.Builder
	for _, e := range evs {
		if e.str("type") == "tool_progress" && e.str("stream") == "stdout" {
			out.WriteString(e.str("text"))
		}
	}
	if out.String() != "before\nafter\n" {
		t.Errorf("output followed through B: %q, want %q", out.String(), "before\nafter\n")
	}
	if m := messages(t, evs)["x"]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "after") {
		t.Errorf("message followed through B: %s", m.raw)
	}
	t.Logf("followed through B for %s", time.Since(start).Round(time.Millisecond))
	<-rest
}

// TestCallEventsFollowCallClaimedElsewhere: a client follows, on replica A, a call of
// A that waits for approval; the approval is decided on B, which runs the call (nobody
// waits for it on A). A's stream had the call's message without any of its output:
// it relayed output only from the replica that ran the call when the stream began.
func TestCallEventsFollowCallClaimedElsewhere(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) { c.Permissions.Allow = nil })
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, _, leave := streamUntilApproval(t, a, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"echo first | tee out.txt; sleep 0.5; echo second"}}]}`)
	leave()
	_, _, body := a.do("GET", "/v1/approvals/"+apr["id"].(string), nil)
	var rec struct {
		CallID string `json:"call_id"`
	}
	if err := json.Unmarshal(body, &rec); err != nil || rec.CallID == "" {
		t.Fatalf("approval: %s", body)
	}
	_, rest := getUntilEvent(t, a, "/v1/tool-calls/"+rec.CallID+"/events", "approval_required")
	if code, _, body := b.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("decide on B: %d %s", code, body)
	}
	evs := <-rest
	if m := restMessages(t, evs)["x"]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "second") {
		t.Fatalf("message: %s", m.raw)
	}
	var out strings.Builder
	for _, e := range evs {
		if e.str("type") == "tool_progress" && e.str("stream") == "stdout" {
			out.WriteString(e.str("text"))
		}
	}
	if out.String() != "first\nsecond\n" {
		t.Errorf("output followed on A of the call B ran: %q, want %q", out.String(), "first\nsecond\n")
	}
}
