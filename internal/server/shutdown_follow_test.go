package server_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestShutdownDoesNotWaitForFollowers: a redeploy while a client follows a call that
// waits for a person — GET /v1/tool-calls/{id}/events, or a batch sent again with
// "resume": true — stops at once, as it does for the call's own stream, instead of
// holding the drain for shutdown_timeout and then ending the stream with done and no
// message. The follower is told the request stays pending; it still is after the
// restart.
func TestShutdownDoesNotWaitForFollowers(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"events", "resume"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			opts := daemonOpts{dataDir: t.TempDir(), mutate: func(c *config.Config) {
				c.Permissions.Allow = nil
				c.ShutdownTimeout = time.Minute
			}}
			d := startDaemon(t, opts)
			id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
			batch := `{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"echo ran >> ran.txt"}}]}`
			apr, _, leave := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", batch)
			leave() // the agent's stream is gone; the request stays pending
			var rest <-chan []event
			if via == "events" {
				_, _, body := d.do("GET", "/v1/approvals/"+apr["id"].(string), nil)
				var a struct {
					CallID string `json:"call_id"`
				}
				if err := json.Unmarshal(body, &a); err != nil || a.CallID == "" {
					t.Fatalf("approval: %s", body)
				}
				_, rest = getUntilEvent(t, d, "/v1/tool-calls/"+a.CallID+"/events", "approval_required")
			} else {
				var stop func()
				_, rest, stop = streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"resume":true,`+batch[1:])
				defer stop()
			}
			start := time.Now()
			d.stop()
			if took := time.Since(start); took > 30*time.Second {
				t.Fatalf("shutdown took %v with a stream following a call that waits for approval (shutdown_timeout 1m)", took)
			}
			m, ok := restMessages(t, <-rest)["w"]
			if !ok || m.str("error_kind") != "cancelled" || !strings.Contains(string(m.raw), "shut down") || !strings.Contains(string(m.raw), "stays pending") || !strings.Contains(string(m.raw), `"goes_on":true`) {
				t.Fatalf("the following stream's message: %s", m.raw)
			}

			d2 := startDaemon(t, opts)
			if _, _, body := d2.do("GET", "/v1/approvals/"+apr["id"].(string), nil); !strings.Contains(string(body), `"status":"pending"`) {
				t.Fatalf("the approval after the restart: %s", body)
			}
		})
	}
}

// TestShutdownOfOwnerKeepsForwardedFollower: a client follows, through replica B, a
// call of replica A that waits for approval (B forwards the events stream to A), and A
// is redeployed. A stops at once, and the client's stream does not end with A's "the
// server shut down" message, since B is not stopping: B follows the call on, and the
// approval decided on B brings the call's real result.
func TestShutdownOfOwnerKeepsForwardedFollower(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Permissions.Allow = nil
		c.ShutdownTimeout = time.Minute
	})
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, _, leave := streamUntilApproval(t, a, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"echo approved-output | tee out.txt"}}]}`)
	leave()
	_, _, body := b.do("GET", "/v1/approvals/"+apr["id"].(string), nil)
	var rec struct {
		CallID string `json:"call_id"`
	}
	if err := json.Unmarshal(body, &rec); err != nil || rec.CallID == "" {
		t.Fatalf("approval: %s", body)
	}
	_, rest := getUntilEvent(t, b, "/v1/tool-calls/"+rec.CallID+"/events", "approval_required")
	start := time.Now()
	a.stop()
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("replica A's shutdown took %v with B following its call through it (shutdown_timeout 1m)", took)
	}
	if code, _, body := b.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("decide on B: %d %s", code, body)
	}
	m, ok := restMessages(t, <-rest)["w"]
	if !ok || m.m["is_error"] != false || !strings.Contains(string(m.raw), "approved-output") {
		t.Fatalf("the message B's follower got: %s", m.raw)
	}
}

// TestShutdownAnswersApprovalsLongPoll: an approver's console long-polls
// GET /v1/approvals?status=pending&wait=2m. A redeploy answered it only at the drain
// deadline, with HTTP 200 and an empty body; it now answers at once with what there
// is (no approvals), and the console polls again, reaching another replica or the
// restarted one.
func TestShutdownAnswersApprovalsLongPoll(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.ShutdownTimeout = time.Minute }})
	type answer struct {
		code int
		body []byte
	}
	got := make(chan answer, 1)
	go func() {
		code, _, body := d.do("GET", "/v1/approvals?status=pending&wait=2m", nil)
		got <- answer{code, body}
	}()
	time.Sleep(300 * time.Millisecond) // the poll is held (nothing is pending)
	start := time.Now()
	d.stop()
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("shutdown took %v with an approvals long-poll open (shutdown_timeout 1m)", took)
	}
	a := <-got
	var list struct {
		Approvals []json.RawMessage `json:"approvals"`
	}
	if err := json.Unmarshal(a.body, &list); a.code != 200 || err != nil || list.Approvals == nil {
		t.Fatalf("the long-poll's answer at shutdown: %d %q", a.code, a.body)
	}
}

// TestShutdownEndsSessionEvents: a backend keeps GET /v1/sessions/{id}/events open
// for its background calls' results. A redeploy held the drain with it for the whole
// shutdown_timeout; the stream now ends once this process's calls are over, and the
// backend connects again (to another replica, or the restarted one).
func TestShutdownEndsSessionEvents(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.ShutdownTimeout = time.Minute }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	resp, err := http.Get(d.url + "/v1/sessions/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()
	start := time.Now()
	d.stop()
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("shutdown took %v with a session events stream open (shutdown_timeout 1m)", took)
	}
	if err := <-ended; err != nil {
		t.Fatalf("the session events stream did not end cleanly: %v", err)
	}
}

// TestShutdownEndsJobOutputStream: a UI follows a background job's output (its call's
// SSE progress stream), a dev server that never ends by itself. A redeploy held the
// drain with it for the whole shutdown_timeout, the job printing on; the stream now
// ends at once (without a closed event: the output is not over) and the job is ended
// with the daemon.
func TestShutdownEndsJobOutputStream(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.ShutdownTimeout = time.Minute }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"j","name":"execute_command","arguments":{"command":"while true; do echo tick; sleep 0.2; done","background":true}}]}`)
	callID := messages(t, evs)["j"].str("call_id")
	if callID == "" {
		t.Fatalf("no call id: %v", evs)
	}
	resp, err := http.Get(d.url + "/v1/tool-calls/" + callID + "/progress/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for { // the job's output arrives
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the progress stream ended before any output: %v", err)
		}
		if strings.Contains(line, "tick") {
			break
		}
	}
	ended := make(chan string, 1)
	go func() {
		rest, _ := io.ReadAll(br)
		ended <- string(rest)
	}()
	start := time.Now()
	d.stop()
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("shutdown took %v with a background job's output stream open (shutdown_timeout 1m)", took)
	}
	if rest := <-ended; strings.Contains(rest, "event: closed") {
		t.Fatalf("the stream of output that is not over ended with a closed event: %s", rest)
	}
}
