package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
	"github.com/toolserverd/toolserverd/internal/webhook"
)

type hookEvent struct {
	Type string `json:"type"`
	Data struct {
		Tenant   string `json:"tenant"`
		Approval struct {
			ID, Tool, Status, Reason string
			SessionID                string `json:"session_id"`
			Decision                 *struct{ Kind, Reason, Actor string }
		} `json:"approval"`
	} `json:"data"`
}

// TestApprovalWebhook: with approval_webhook set, a request for approval and its
// decision reach the endpoint, signed with the secret, with what an approver needs
// (tool, reason, session) and who decided.
func TestApprovalWebhook(t *testing.T) {
	t.Parallel()
	const secretVar = "TOOLSERVER_TEST_WEBHOOK_SECRET_APP" // this test's own
	os.Setenv(secretVar, "hook-secret")
	t.Cleanup(func() { os.Unsetenv(secretVar) })
	var mu sync.Mutex
	var events []hookEvent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if sig := r.Header.Get("X-Toolserver-Signature"); sig != webhook.Sign("hook-secret", r.Header.Get("X-Toolserver-Timestamp"), b) {
			t.Errorf("bad signature %q", sig)
		}
		var ev hookEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	d := testdaemon.Start(t, func(c *config.Config) {
		c.ApprovalWebhook = config.ApprovalWebhookConfig{URL: srv.URL, SecretEnv: secretVar, Timeout: 5 * time.Second}
	})
	post := func(path string, body any) (int, []byte) {
		b, _ := json.Marshal(body)
		resp, err := http.Post(d.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	wait := func(n int) []hookEvent {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			got := append([]hookEvent(nil), events...)
			mu.Unlock()
			if len(got) >= n {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d webhook events, want %d: %+v", len(got), n, got)
			}
		}
	}

	// The call's stream waits for the decision.
	streamed := make(chan []byte, 1)
	go func() {
		_, out := post("/v1/tool-calls", map[string]any{"session": map[string]any{"available_tools": []string{"execute_command"}},
			"calls": []any{map[string]any{"id": "c", "name": "execute_command", "arguments": map[string]any{"command": "rm -rf build"}}}})
		streamed <- out
	}()
	req := wait(1)[0]
	a := req.Data.Approval
	if req.Type != "approval.requested" || req.Data.Tenant == "" || a.ID == "" || a.Tool != "execute_command" || a.SessionID == "" ||
		!strings.Contains(a.Reason, "rm -rf build") {
		t.Fatalf("requested: %+v", req)
	}
	if code, out := post("/v1/approvals/"+a.ID+"/decision", map[string]any{"decision": "deny", "reason": "not today", "actor": "alice"}); code != http.StatusOK {
		t.Fatalf("decide: %d %s", code, out)
	}
	dec := wait(2)[1]
	if dec.Type != "approval.denied" || dec.Data.Approval.ID != a.ID || dec.Data.Approval.Status != "denied" ||
		dec.Data.Approval.Decision == nil || dec.Data.Approval.Decision.Reason != "not today" {
		t.Fatalf("denied: %+v", dec)
	}
	if out := <-streamed; !strings.Contains(string(out), "not today") {
		t.Errorf("the stream did not end with the denial: %s", out)
	}
}
