package server_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestBackgroundApprovalOnAnotherReplica: a background call that waits for approval
// sends approval_required to every open stream of its session, as its result later.
// Behind a Service those streams are open on any replica: the approval_required of a
// call running on A reaches a session stream open on B, once, with the same approval
// as A's, and the call approved through B then brings its tool_result there too.
func TestBackgroundApprovalOnAnotherReplica(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Permissions.Allow = slices.DeleteFunc(slices.Clone(c.Permissions.Allow), func(r string) bool { return r == "bg_sleep" })
		c.Permissions.Ask = []string{"bg_sleep"}
	})
	id := a.createSession(map[string]any{})["id"].(string)
	onA, onB := sessionEventLines(t, a, id), sessionEventLines(t, b, id)

	code, evs := a.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"bg","name":"bg_sleep","arguments":{"ms":10}}]}`)
	handle := messages(t, evs)["bg"]
	if code != 200 || handle.m["is_error"] != false {
		t.Fatalf("background call on A: %d %s", code, handle.raw)
	}
	callID := handle.str("call_id")

	type line struct {
		Type       string `json:"type"`
		CallID     string `json:"call_id"`
		ToolCallID string `json:"tool_call_id"`
		Name       string `json:"name"`
		Approval   struct {
			ID     string `json:"id"`
			Risk   string `json:"risk"`
			Reason string `json:"reason"`
		} `json:"approval"`
	}
	// next returns the next line of a session stream that is not a keepalive.
	next := func(name string, lines <-chan timedLine) (line, []byte) {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			select {
			case l := <-lines:
				var e line
				_ = json.Unmarshal(l.line, &e)
				if e.Type == "keepalive" || len(l.line) <= 1 {
					continue
				}
				validateResponse(t, "GET", "/v1/sessions/{sessionID}/events", "200", "application/x-ndjson", l.line)
				return e, l.line
			case <-deadline:
				t.Fatalf("session events on %s: nothing after 15 s", name)
			}
		}
	}
	fromA, rawA := next("A", onA)
	if fromA.Type != "approval_required" || fromA.CallID != callID || fromA.Approval.ID == "" {
		t.Fatalf("session events on A: %s; want the approval_required of %s", rawA, callID)
	}
	fromB, rawB := next("B", onB)
	if fromB != fromA {
		t.Fatalf("session events on B: %s; want what A sent: %s", rawB, rawA)
	}

	// Approved through B, the call runs on A; B's stream gets its result next, and no
	// second approval_required before it.
	if code, _, body := b.do("POST", "/v1/approvals/"+fromB.Approval.ID+"/decision", `{"decision":"approve","actor":"ada"}`); code != 200 {
		t.Fatalf("approve through B: %d %s", code, body)
	}
	for name, lines := range map[string]<-chan timedLine{"A": onA, "B": onB} {
		if e, raw := next(name, lines); e.Type != "tool_result" || e.CallID != callID {
			t.Fatalf("session events on %s after the approval: %s; want the tool_result of %s", name, raw, callID)
		}
	}
}
