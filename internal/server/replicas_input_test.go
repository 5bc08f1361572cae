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

// yieldStream posts a batch with one call of the stateful confirm tool to d and
// returns a reader of its NDJSON lines; the response is closed when the test ends.
func yieldStream(t *testing.T, d *daemon, sess string) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+"/v1/sessions/"+sess+"/tool-calls", strings.NewReader(`{"calls":[{"id":"c","name":"confirm"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return bufio.NewReader(resp.Body)
}

// nextOf reads lines until one of type typ, which it returns.
func nextOf(t *testing.T, br *bufio.Reader, typ string) event {
	t.Helper()
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("stream ended before %s: %v", typ, err)
		}
		validate(t, "StreamEvent", line)
		var m map[string]any
		_ = json.Unmarshal(line, &m)
		if m["type"] == typ {
			return event{raw: line, m: m}
		}
	}
}

// TestReplicaInputOnAnotherReplica: behind a Service, the agent's answer to a
// stateful call's tool_yield (POST …/input) lands on any replica, while the call waits
// for it in the memory of the replica running it. A call running on A takes both of
// its answers posted to B, and its stream on A ends with them.
func TestReplicaInputOnAnotherReplica(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, nil)
	id := a.createSession(map[string]any{})["id"].(string)
	br := yieldStream(t, a, id)
	for _, ans := range []string{`"yes"`, `{"sure":true}`} {
		y := nextOf(t, br, "tool_yield")
		start := time.Now()
		code, _, body := b.do("POST", "/v1/tool-calls/"+y.str("call_id")+"/input", `{"input":`+ans+`}`)
		if code != http.StatusAccepted || !strings.Contains(string(body), `"accepted":true`) {
			t.Fatalf("input %s on B for a call waiting on A: %d %s", ans, code, body)
		}
		t.Logf("input on B answered in %s", time.Since(start).Round(100*time.Microsecond))
	}
	m := nextOf(t, br, "message")
	var msg struct {
		Message struct{ Content string } `json:"message"`
	}
	_ = json.Unmarshal(m.raw, &msg)
	if msg.Message.Content != `answers: "yes" {"sure":true}` {
		t.Fatalf("the call's result on A: %s", m.raw)
	}
	// Nothing waits any more: another answer on B is a conflict, as on A.
	if code, _, body := b.do("POST", "/v1/tool-calls/"+m.str("call_id")+"/input", `{"input":1}`); code != http.StatusConflict {
		t.Fatalf("input on B for a finished call: %d %s", code, body)
	}
}

// TestReplicaInputOwnerUnreachable: an answer posted to B for a call waiting on A,
// whose advertised address cannot be reached, cannot be delivered: it is 503
// unavailable with Retry-After, naming the replica and its address, not a 409 that
// says the call is not waiting. The call still takes the answer on A.
func TestReplicaInputOwnerUnreachable(t *testing.T) {
	t.Parallel()
	closed := "http://" + closedAddr(t)
	a, b := twoReplicas(t, func(c *config.Config) {
		if c.ReplicaID == "replica-a" {
			c.Cluster.AdvertiseURL = closed
		}
	})
	id := a.createSession(map[string]any{})["id"].(string)
	br := yieldStream(t, a, id)
	y := nextOf(t, br, "tool_yield")
	code, h, body := b.do("POST", "/v1/tool-calls/"+y.str("call_id")+"/input", `{"input":"yes"}`)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if code != http.StatusServiceUnavailable || e.Error.Code != "unavailable" || h.Get("Retry-After") == "" ||
		!strings.Contains(e.Error.Message, "replica-a") || !strings.Contains(e.Error.Message, closed) {
		t.Fatalf("input on B, the owner unreachable: HTTP %d Retry-After %q %s; want 503 unavailable naming replica-a and %s",
			code, h.Get("Retry-After"), body, closed)
	}
	if code, _, body := a.do("POST", "/v1/tool-calls/"+y.str("call_id")+"/input", `{"input":"yes"}`); code != http.StatusAccepted {
		t.Fatalf("input on A after B's refusal: %d %s", code, body)
	}
	nextOf(t, br, "tool_yield")
}
