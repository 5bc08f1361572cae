package server_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// batchOf is a request body with n echo calls.
func batchOf(n int, session string) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"id":"c%d","name":"echo","arguments":{"text":"%d"}}`, i, i)
	}
	return `{` + session + `"calls":[` + strings.Join(calls, ",") + `]}`
}

// TestBatchCallCap: a batch above calls.max_batch_calls (default 256) is refused with
// 400 naming the limit and the count, on both routes, and none of its calls runs; a
// batch at the limit runs.
func TestBatchCallCap(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	for _, c := range []struct{ name, path, body string }{
		{"session route", "/v1/sessions/" + id + "/tool-calls", batchOf(257, "")},
		{"one-shot route", "/v1/tool-calls", batchOf(257, `"session":{"available_tools":["echo"]},`)},
	} {
		code, _, body := d.do("POST", c.path, c.body)
		if code != 400 {
			t.Fatalf("%s: %d calls: status %d, want 400: %.300s", c.name, 257, code, body)
		}
		validate(t, "Error", body)
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(body, &e)
		if e.Error.Code != "bad_request" || !strings.Contains(e.Error.Message, "257 calls") ||
			!strings.Contains(e.Error.Message, "at most 256") || !strings.Contains(e.Error.Message, "calls.max_batch_calls") {
			t.Errorf("%s: error %s does not name the count, the limit and the key", c.name, body)
		}
	}
	code, _, body := d.do("GET", "/v1/sessions/"+id+"/tool-calls?limit=1000", nil)
	if code != 200 || !strings.Contains(string(body), `"calls":[]`) {
		t.Fatalf("a refused batch left records: %d %.300s", code, body)
	}

	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", batchOf(256, ""))
	if code != 200 {
		t.Fatalf("256 calls: status %d: %.300s", code, evs[0].raw)
	}
	if got := len(messages(t, evs)); got != 256 {
		t.Fatalf("256 calls: %d messages", got)
	}
}

// TestBatchCallCapConfigured: the cap follows calls.max_batch_calls.
func TestBatchCallCapConfigured(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Calls.MaxBatchCalls = 2 }})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	if code, _, body := d.do("POST", "/v1/sessions/"+id+"/tool-calls", batchOf(3, "")); code != 400 || !strings.Contains(string(body), "at most 2") {
		t.Fatalf("3 calls with a cap of 2: %d %s", code, body)
	}
	if code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", batchOf(2, "")); code != 200 || len(messages(t, evs)) != 2 {
		t.Fatalf("2 calls with a cap of 2: %d", code)
	}
}

// TestIdleSessionsLeaveMemory: with sessions.idle_timeout set, sessions (one-shot ones
// included) leave memory once idle, the live-sessions gauge says so, and the next
// request loads the session again with its whitelist.
func TestIdleSessionsLeaveMemory(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Sessions.IdleTimeout = time.Second }})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	code, hdr, body := d.do("POST", "/v1/tool-calls", `{"session":{"available_tools":["echo"]},"calls":[{"id":"a","name":"echo","arguments":{"text":"x"}}]}`)
	if code != 200 {
		t.Fatalf("one-shot: %d %s", code, body)
	}
	oneShot := hdr.Get("X-Session-Id")
	if n := d.app.Sessions.Live(); n != 2 {
		t.Fatalf("live sessions after use: %d, want 2", n)
	}
	deadline := time.Now().Add(15 * time.Second)
	for d.app.Sessions.Live() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := d.app.Sessions.Live(); n != 0 {
		t.Fatalf("live sessions after the idle timeout: %d, want 0", n)
	}
	_, _, metrics := d.do("GET", "/metrics", nil)
	if !regexp.MustCompile(`(?m)^toolserverd_sessions_live 0$`).Match(metrics) {
		t.Errorf("metrics lack toolserverd_sessions_live 0")
	}

	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"b","name":"echo","arguments":{"text":"back"}},{"id":"c","name":"other_tool"}]}`)
	if code != 200 {
		t.Fatalf("call after eviction: %d %s", code, evs[0].raw)
	}
	msgs := messages(t, evs)
	if !strings.Contains(string(msgs["b"].raw), "back") || !strings.Contains(string(msgs["c"].raw), "not_found") {
		t.Fatalf("after reload the whitelist does not hold: %s / %s", msgs["b"].raw, msgs["c"].raw)
	}
	code, _, body = d.do("GET", "/v1/sessions/"+oneShot, nil)
	if code != 200 || !strings.Contains(string(body), `"tools":["echo"]`) {
		t.Fatalf("one-shot session after eviction: %d %s", code, body)
	}
	if n := d.app.Sessions.Live(); n != 2 {
		t.Errorf("live sessions after reloading both: %d, want 2", n)
	}
}
