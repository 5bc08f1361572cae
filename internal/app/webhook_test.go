package app_test

import (
	"bytes"
	"context"
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
			ExpiresAt                *time.Time `json:"expires_at"`
		} `json:"approval"`
	} `json:"data"`
}

// hookReceiver is an approval webhook endpoint on loopback that checks each delivery's
// signature (none when secret is empty) and keeps the events.
type hookReceiver struct {
	URL string
	mu  sync.Mutex
	got []hookEvent
}

func receiveHooks(t *testing.T, secret string) *hookReceiver {
	h := &hookReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sig := r.Header.Get("X-Toolserver-Signature")
		if secret != "" && sig != webhook.Sign(secret, r.Header.Get("X-Toolserver-Timestamp"), b) || secret == "" && sig != "" {
			t.Errorf("bad signature %q", sig)
		}
		var ev hookEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		if typ := r.Header.Get("X-Toolserver-Event"); typ != ev.Type {
			t.Errorf("X-Toolserver-Event %q, body type %q", typ, ev.Type)
		}
		h.mu.Lock()
		h.got = append(h.got, ev)
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

// wait returns the events once there are at least n.
func (h *hookReceiver) wait(t *testing.T, n int) []hookEvent {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		h.mu.Lock()
		got := append([]hookEvent(nil), h.got...)
		h.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d webhook events, want %d: %+v", len(got), n, got)
		}
	}
}

func post(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// streamCall posts one execute_command call of command to a session's tool-calls URL
// and returns the stream's body when it ends (or ctx does).
func streamCall(ctx context.Context, url, command string) <-chan []byte {
	out := make(chan []byte, 1)
	b, _ := json.Marshal(map[string]any{"calls": []any{map[string]any{"id": "c", "name": "execute_command", "arguments": map[string]any{"command": command}}}})
	go func() {
		var body []byte
		req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		out <- body
	}()
	return out
}

// TestApprovalWebhook: with approval_webhook set, a request for approval and its
// decision reach the endpoint, signed with the secret, with what an approver needs
// (tool, reason, session) and who decided.
func TestApprovalWebhook(t *testing.T) {
	t.Parallel()
	const secretVar = "TOOLSERVER_TEST_WEBHOOK_SECRET_APP" // this test's own
	os.Setenv(secretVar, "hook-secret")
	t.Cleanup(func() { os.Unsetenv(secretVar) })
	hooks := receiveHooks(t, "hook-secret")
	d := testdaemon.Start(t, func(c *config.Config) {
		c.ApprovalWebhook = config.ApprovalWebhookConfig{URL: hooks.URL, SecretEnv: secretVar, Timeout: 5 * time.Second}
	})

	// The call's stream waits for the decision.
	streamed := make(chan []byte, 1)
	go func() {
		_, out := post(t, d.URL+"/v1/tool-calls", map[string]any{"session": map[string]any{"available_tools": []string{"execute_command"}},
			"calls": []any{map[string]any{"id": "c", "name": "execute_command", "arguments": map[string]any{"command": "rm -rf build"}}}})
		streamed <- out
	}()
	req := hooks.wait(t, 1)[0]
	a := req.Data.Approval
	if req.Type != "approval.requested" || req.Data.Tenant == "" || a.ID == "" || a.Tool != "execute_command" || a.SessionID == "" ||
		!strings.Contains(a.Reason, "rm -rf build") {
		t.Fatalf("requested: %+v", req)
	}
	if code, out := post(t, d.URL+"/v1/approvals/"+a.ID+"/decision", map[string]any{"decision": "deny", "reason": "not today", "actor": "alice"}); code != http.StatusOK {
		t.Fatalf("decide: %d %s", code, out)
	}
	dec := hooks.wait(t, 2)[1]
	if dec.Type != "approval.denied" || dec.Data.Approval.ID != a.ID || dec.Data.Approval.Status != "denied" ||
		dec.Data.Approval.Decision == nil || dec.Data.Approval.Decision.Reason != "not today" {
		t.Fatalf("denied: %+v", dec)
	}
	if out := <-streamed; !strings.Contains(string(out), "not today") {
		t.Errorf("the stream did not end with the denial: %s", out)
	}
}

// TestApprovalWebhookExpired: a request nobody decided in time is told to the endpoint
// as approval.expired, exactly once, whatever expires it: the waiting stream's own
// deadline, a decision that comes too late, or the sweep (every 5 s) when nobody waits.
func TestApprovalWebhookExpired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		leave      bool // the client goes away while the call waits
		decideLate bool
	}{
		{"stream waits", false, false},
		{"decided too late", true, true},
		{"swept", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hooks := receiveHooks(t, "")
			d := testdaemon.Start(t, func(c *config.Config) {
				c.ApprovalWebhook = config.ApprovalWebhookConfig{URL: hooks.URL, Timeout: 5 * time.Second}
				c.Permissions.ApprovalTTL = time.Second
			})
			sess := map[string]any{"available_tools": []string{"execute_command"}}
			code, out := post(t, d.URL+"/v1/sessions", sess)
			if code != http.StatusCreated {
				t.Fatalf("create session: %d %s", code, out)
			}
			var s struct{ ID string }
			_ = json.Unmarshal(out, &s)
			calls := d.URL + "/v1/sessions/" + s.ID + "/tool-calls"
			ctx, leave := context.WithCancel(t.Context())
			defer leave()
			streamed := streamCall(ctx, calls, "rm -rf build")
			req := hooks.wait(t, 1)[0]
			a := req.Data.Approval
			if req.Type != "approval.requested" || a.ExpiresAt == nil {
				t.Fatalf("requested: %+v", req)
			}
			if tc.leave {
				leave()
				<-streamed
			}
			if tc.decideLate {
				time.Sleep(time.Until(*a.ExpiresAt) + 20*time.Millisecond)
				if code, out := post(t, d.URL+"/v1/approvals/"+a.ID+"/decision", map[string]any{"decision": "approve"}); code != http.StatusConflict {
					t.Fatalf("decision after expiry: %d %s, want 409", code, out)
				}
			}
			exp := hooks.wait(t, 2)[1]
			if exp.Type != "approval.expired" || exp.Data.Tenant != req.Data.Tenant || exp.Data.Approval.ID != a.ID ||
				exp.Data.Approval.Status != "expired" || exp.Data.Approval.Tool != "execute_command" || exp.Data.Approval.Decision != nil {
				t.Fatalf("expired: %+v", exp)
			}
			if !tc.leave {
				if out := <-streamed; !strings.Contains(string(out), "approval request expired") {
					t.Errorf("the stream did not end with the expiry: %s", out)
				}
			}
			// Events are delivered in order: once a later request is told, a second
			// approval.expired sent before it would have been too.
			streamCall(t.Context(), calls, "rm -rf dist")
			for got := hooks.wait(t, 3); ; got = hooks.wait(t, len(got)+1) {
				if last := got[len(got)-1]; last.Type != "approval.requested" || last.Data.Approval.ID == a.ID {
					continue
				}
				n := 0
				for _, ev := range got {
					if ev.Type == "approval.expired" && ev.Data.Approval.ID == a.ID {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("approval.expired sent %d times for %s, want once: %+v", n, a.ID, got)
				}
				break
			}
		})
	}
}
