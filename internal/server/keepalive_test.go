package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// Streams that have nothing to say (a call waiting for a person, a quiet session)
// write keepalive lines every stream_keepalive, so that proxies with an idle timeout
// do not cut them: the tool-calls stream of a call waiting for approval, the call's
// events followed from elsewhere, and the session's event stream.
func TestStreamKeepalive(t *testing.T) {
	t.Parallel()
	const every = 150 * time.Millisecond
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Permissions.Allow = nil
		c.StreamKeepalive = every
	}})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})
	id := sess["id"].(string)

	apr, _, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"echo x > f"}}]}`)
	defer stop()
	_, _, body := d.do("GET", "/v1/approvals/"+apr["id"].(string), nil)
	var a struct {
		CallID string `json:"call_id"`
	}
	if err := json.Unmarshal(body, &a); err != nil || a.CallID == "" {
		t.Fatalf("approval: %s %v", body, err)
	}
	callID := a.CallID

	count := func(path, schema string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*every)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", d.url+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var e struct{ Type string }
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("%s: %q: %v", path, sc.Text(), err)
			}
			validate(t, schema, sc.Bytes())
			if e.Type == "keepalive" {
				n++
			}
		}
		return n
	}
	if n := count("/v1/tool-calls/"+callID+"/events", "StreamEvent"); n < 2 {
		t.Errorf("a followed call waiting for approval: %d keepalive lines in %s, want at least 2", n, 5*every)
	}
	if n := count("/v1/sessions/"+id+"/events", "KeepaliveEvent"); n < 2 {
		t.Errorf("a quiet session's events: %d keepalive lines in %s, want at least 2", n, 5*every)
	}

	// The batch's own stream, read after the approval request: keepalives while it
	// waits, then the result once it is decided.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+"/v1/sessions/"+id+"/tool-calls",
		strings.NewReader(`{"calls":[{"id":"w2","name":"execute_command","arguments":{"command":"echo y > g"}}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	keepalives, approval := 0, ""
	for sc.Scan() {
		validate(t, "StreamEvent", sc.Bytes())
		var e struct {
			Type     string
			Approval struct{ ID string }
		}
		_ = json.Unmarshal(sc.Bytes(), &e)
		switch e.Type {
		case "approval_required":
			approval = e.Approval.ID
		case "keepalive":
			if keepalives++; keepalives == 2 {
				if code, _, body := d.do("POST", "/v1/approvals/"+approval+"/decision", `{"decision":"approve"}`); code != 200 {
					t.Fatalf("approve: %d %s", code, body)
				}
			}
		case "message":
			if keepalives < 2 || approval == "" {
				t.Fatalf("message after %d keepalives (approval %q)", keepalives, approval)
			}
		case "done":
			return
		}
	}
	t.Fatalf("the stream ended without done: %v", sc.Err())
}
