package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// sessionEventLines opens GET /v1/sessions/{id}/events on d and sends its lines, each
// with the time it was read, to the returned channel until the test ends.
func sessionEventLines(t *testing.T, d *daemon, sess string) <-chan timedLine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", d.url+"/v1/sessions/"+sess+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("session events on %s: %d", d.url, resp.StatusCode)
	}
	out := make(chan timedLine, 16)
	go func() {
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			select {
			case out <- timedLine{line, time.Now()}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

type timedLine struct {
	line []byte
	at   time.Time
}

// TestReplicaSessionEventsOnAnotherReplica: a background call's result goes to every
// open stream of its session (GET /v1/sessions/{id}/events, the session's batch
// streams). Behind a Service those streams are open on any replica: a result of a
// call that ran on A reaches a session stream open on B, once, as it does the one
// open on A.
func TestReplicaSessionEventsOnAnotherReplica(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, nil)
	id := a.createSession(map[string]any{})["id"].(string)
	onA, onB := sessionEventLines(t, a, id), sessionEventLines(t, b, id)
	// And a batch stream of the session open on B.
	_, batchOnB, stop := streamUntilEvent(t, b, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"blk","name":"block"}]}`, "tool_start")
	defer stop()

	code, evs := a.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"bg","name":"bg_sleep","arguments":{"ms":300}}]}`)
	handle := messages(t, evs)["bg"]
	if code != 200 || handle.m["is_error"] != false {
		t.Fatalf("background call on A: %d %s", code, handle.raw)
	}
	callID := handle.str("call_id")
	results := func(name string, lines <-chan timedLine) time.Time {
		t.Helper()
		var got []string
		var at time.Time
		deadline := time.After(15 * time.Second)
		quiet := (<-chan time.Time)(nil)
		for {
			select {
			case l := <-lines:
				var e struct {
					Type    string                   `json:"type"`
					CallID  string                   `json:"call_id"`
					IsError bool                     `json:"is_error"`
					Message struct{ Content string } `json:"message"`
				}
				_ = json.Unmarshal(l.line, &e)
				if e.Type == "keepalive" || len(l.line) <= 1 {
					continue
				}
				validateResponse(t, "GET", "/v1/sessions/{sessionID}/events", "200", "application/x-ndjson", l.line)
				if e.Type != "tool_result" || e.CallID != callID || e.IsError || e.Message.Content != "background work done" {
					t.Fatalf("session events on %s: %s; want the tool_result of %s", name, l.line, callID)
				}
				got = append(got, string(l.line))
				at = l.at
				quiet = time.After(time.Second) // a second copy would come now
			case <-quiet:
				if len(got) != 1 {
					t.Fatalf("session events on %s: %d tool_result lines, want 1: %q", name, len(got), got)
				}
				return at
			case <-deadline:
				t.Fatalf("session events on %s: %d tool_result lines after 15 s, want 1", name, len(got))
			}
		}
	}
	atA, atB := results("A", onA), results("B", onB)
	t.Logf("tool_result on B's session stream %s after A's", atB.Sub(atA).Round(100*time.Microsecond))
	close(b.tools.release)
	n := 0
	for _, e := range <-batchOnB {
		if e.str("type") == "tool_result" {
			n++
			if e.str("call_id") != callID {
				t.Errorf("tool_result on B's batch stream: %s", e.raw)
			}
		}
	}
	if n != 1 {
		t.Errorf("B's batch stream of the session had %d tool_result lines, want 1", n)
	}
}
