package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestElicitationWithdrawnWhenDecidedElsewhere: a desktop client (the TypeScript SDK's,
// declaring elicitation, with an agent+approver key) shows its user the approval
// question; meanwhile an approver decides the request through REST. The call ends
// with that decision, and the question the client still shows is withdrawn
// (notifications/cancelled for the elicitation request), so that nobody answers a
// dialog about a call already decided (the answer got a 400 "No pending sampling
// request found").
func TestElicitationWithdrawnWhenDecidedElsewhere(t *testing.T) {
	t.Parallel()
	script := sdkScript(t, "sdk-elicit-client.mjs")
	d, admin := startWithKeys(t)
	var k struct{ Key string }
	d.doHeaders(http.MethodPost, "/v1/keys", admin, map[string]any{"roles": []string{"agent", "approver"}}, http.StatusCreated, &k)
	var s sessionResp
	d.doHeaders(http.MethodPost, "/v1/sessions", admin,
		map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default"}, http.StatusCreated, &s)

	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	args, _ := json.Marshal(map[string]any{"command": riskyCommand})
	cmd := exec.CommandContext(ctx, "node", script, d.URL+"/v1/sessions/"+s.ID+"/mcp", k.Key, "execute_command", string(args))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	next := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the client ended early: %v", lines.Err())
		}
		var ev map[string]any
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("client output %q: %v", lines.Text(), err)
		}
		return ev
	}
	if ev := next(); ev["event"] != "elicit" {
		t.Fatalf("first event %v, want the client asked about the approval", ev)
	}
	var list struct {
		Approvals []approvalRec `json:"approvals"`
	}
	d.doHeaders(http.MethodGet, "/v1/approvals?status=pending&session_id="+s.ID, admin, nil, http.StatusOK, &list)
	if len(list.Approvals) != 1 {
		t.Fatalf("pending approvals: %+v", list.Approvals)
	}
	d.doHeaders(http.MethodPost, "/v1/approvals/"+list.Approvals[0].ID+"/decision", admin,
		map[string]any{"decision": "deny", "reason": "decided in the console"}, http.StatusOK, nil)

	var result, withdrawn bool
	for ev := next(); ev["event"] != "done"; ev = next() {
		switch ev["event"] {
		case "result":
			b, _ := json.Marshal(ev["result"])
			if !strings.Contains(string(b), "decided in the console") {
				t.Errorf("the call's result %s, want the REST denial", b)
			}
			result = true
		case "elicit_cancelled":
			withdrawn = true
		default:
			t.Errorf("client event %v", ev)
		}
	}
	if !result {
		t.Error("the call got no result")
	}
	if !withdrawn {
		t.Error("the client's approval question stayed open after the approval was decided through REST: the server did not cancel it")
	}
}
