package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestWaitingCallOutputFollowedToItsRunner: a call waits for approval on replica A,
// its client gone; a console opens the call's progress stream (on A, its replica).
// Approved through B, nobody waiting, the call runs on B: the stream on A must show
// B's output before its closed event, not close at once as a call that printed
// nothing (it did, on B).
func TestWaitingCallOutputFollowedToItsRunner(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) { c.Permissions.Allow = nil })
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, _, stop := streamUntilApproval(t, a, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"echo first; echo second; echo x > f.txt"}}]}`)
	stop()
	callID := approvalCallID(t, b, apr["id"].(string))

	resp, err := http.Get(a.url + "/v1/tool-calls/" + callID + "/progress/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("progress stream on A: %d", resp.StatusCode)
	}
	if code, _, body := b.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("approve through B: %d %s", code, body)
	}
	type sse struct {
		text   string
		closed map[string]any
	}
	got := make(chan sse, 1)
	go func() {
		text, closed, _ := readProgressSSE(resp.Body)
		got <- sse{text, closed}
	}()
	select {
	case s := <-got:
		if s.text != "first\nsecond\n" || s.closed == nil || s.closed["output_lost"] == true {
			t.Fatalf("progress stream on A of the call run on B: output %q, closed event %v; want B's output, then closed", s.text, s.closed)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the progress stream on A did not end within 60 s")
	}
	if _, _, rec := b.do("GET", "/v1/tool-calls/"+callID, nil); !strings.Contains(string(rec), `"succeeded"`) {
		t.Fatalf("record: %s", rec)
	}
}

// TestWaitingCallOutputNotLostWithItsReplica: a call waits for approval on replica A,
// which then stops. The call has not run: its output is not lost but not yet
// written, whoever runs it once approved. A progress read through B must say so
// (not finished, no output_lost), and once approved through B, show B's output.
func TestWaitingCallOutputNotLostWithItsReplica(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) { c.Permissions.Allow = nil })
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, _, stop := streamUntilApproval(t, a, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"echo ran; echo x > f.txt"}}]}`)
	stop()
	callID := approvalCallID(t, b, apr["id"].(string))
	a.stop()

	var p struct {
		Data       string `json:"data"`
		Finished   bool   `json:"finished"`
		OutputLost bool   `json:"output_lost"`
	}
	code, _, body := b.do("GET", "/v1/tool-calls/"+callID+"/progress", nil)
	if code != 200 || json.Unmarshal(body, &p) != nil || p.Finished || p.OutputLost {
		t.Fatalf("progress through B of a call waiting for approval, its replica stopped: %d %s; want not finished, no output_lost", code, body)
	}
	if code, _, body := b.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("approve through B: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "the approved call's output read through B", func() bool {
		_, _, body := b.do("GET", "/v1/tool-calls/"+callID+"/progress", nil)
		p = struct {
			Data       string `json:"data"`
			Finished   bool   `json:"finished"`
			OutputLost bool   `json:"output_lost"`
		}{}
		return json.Unmarshal(body, &p) == nil && p.Finished && p.Data == "ran\n" && !p.OutputLost
	})
}

// approvalCallID is the call an approval request is about, read through d.
func approvalCallID(t *testing.T, d *daemon, approvalID string) string {
	t.Helper()
	code, _, body := d.do("GET", "/v1/approvals/"+approvalID, nil)
	var a struct {
		CallID string `json:"call_id"`
	}
	if code != 200 || json.Unmarshal(body, &a) != nil || a.CallID == "" {
		t.Fatalf("GET approval %s: %d %s", approvalID, code, body)
	}
	return a.CallID
}

// TestWaitingCallRelayEndsWithItsClient: a progress stream on A of a call that
// waited there and then ran on B is relayed from B's stream; once the client leaves
// A, A's request to B must end too, not hold B's stream (and a connection) for as
// long as the call runs.
func TestWaitingCallRelayEndsWithItsClient(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) { c.Permissions.Allow = nil })
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, _, stop := streamUntilApproval(t, a, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"echo first; sleep 300; echo x > f.txt"}}]}`)
	stop()
	callID := approvalCallID(t, b, apr["id"].(string))
	defer b.do("POST", "/v1/tool-calls/"+callID+"/cancel", nil)

	req, err := http.NewRequestWithContext(t.Context(), "GET", a.url+"/v1/tool-calls/"+callID+"/progress/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("progress stream on A: %d", resp.StatusCode)
	}
	if code, _, body := b.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("approve through B: %d %s", code, body)
	}
	relayed := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), `"text":"first\n"`) {
				relayed <- true
				return
			}
		}
		relayed <- false
	}()
	select {
	case ok := <-relayed:
		if !ok {
			t.Fatal("the stream on A ended before B's output")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("B's output did not reach the stream on A within 60 s")
	}
	const route = `route="/v1/tool-calls/{callID}/progress/stream"`
	streamsEnded := func() bool {
		_, _, body := b.do("GET", "/metrics", nil)
		for line := range strings.Lines(string(body)) {
			if strings.HasPrefix(line, "toolserverd_http_requests_total{") && strings.Contains(line, route) {
				return true
			}
		}
		return false
	}
	if streamsEnded() {
		t.Fatal("B counts a progress stream as ended while A still relays it")
	}
	resp.Body.Close() // the client leaves
	waitFor(t, 60*time.Second, "B's stream, relayed to A, ends once A's client left", streamsEnded)
}
