package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/config"
)

// TestReplicaResumeOnAnotherReplica: a backend whose connection to replica A dropped
// sends the batch again with resume, and behind a Service the retry lands on B, which
// does not run the call. The resumed stream on B carries the call's output (what A's
// command printed before the retry, then live), then its result; the command ran once.
func TestReplicaResumeOnAnotherReplica(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	a, b := twoReplicas(t, func(c *config.Config) { c.Sessions.WorkdirRoots = []string{shared} })
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": shared})["id"].(string)
	calls := `[{"id":"x","name":"execute_command","arguments":{"command":"echo run >> runs.txt; for i in 1 2 3 4 5 6 7 8; do echo line$i; sleep 0.25; done"}}]`
	postAndDrop(t, a, id, `{"on_disconnect":"continue","calls":`+calls+`}`)
	// Some output before the retry: the resumed stream starts with it.
	waitFor(t, 30*time.Second, "the command printed line2 on A", func() bool {
		_, _, body := a.do("GET", "/v1/sessions/"+id+"/tool-calls/x", nil)
		var rec struct{ ID string }
		_ = json.Unmarshal(body, &rec)
		if rec.ID == "" {
			return false
		}
		_, _, p := a.do("GET", "/v1/tool-calls/"+rec.ID+"/progress", nil)
		return strings.Contains(string(p), "line2")
	})

	resumed := time.Now()
	evs, arrived := streamTimed(t, b, "/v1/sessions/"+id+"/tool-calls", `{"resume":true,"calls":`+calls+`}`)
	out, delays := resumedOutput(t, evs, arrived, resumed)
	var want strings.Builder
	for i := 1; i <= 8; i++ {
		want.WriteString("line" + strconv.Itoa(i) + "\n")
	}
	if out != want.String() {
		t.Fatalf("output on B's resumed stream: %q; want the 8 lines, each once, in order", out)
	}
	t.Logf("events sent by A after the resume, relayed live by B: %d; A's event ts → read by B's client: %v", len(delays), delays)

	// Resumed again on B once the call is over: its output and result, from A.
	evs, arrived = streamTimed(t, b, "/v1/sessions/"+id+"/tool-calls", `{"resume":true,"calls":`+calls+`}`)
	if out, _ := resumedOutput(t, evs, arrived, time.Now()); out != want.String() {
		t.Fatalf("output on B's stream resuming the finished call: %q; want the 8 lines", out)
	}
	b2, err := os.ReadFile(filepath.Join(shared, "runs.txt"))
	if err != nil || string(b2) != "run\n" {
		t.Fatalf("runs.txt = %q (%v): the command must run once", b2, err)
	}
}

// resumedOutput checks a resumed stream of the call x (its result, and its output
// before it, with contiguous offsets) and returns its stdout and, for each event
// sent after since, how long after it was sent it was read.
func resumedOutput(t *testing.T, evs []event, arrived []time.Time, since time.Time) (string, []time.Duration) {
	t.Helper()
	msg := messages(t, evs)["x"]
	if msg.m["resumed"] != true || msg.m["is_error"] != false || !strings.Contains(string(msg.raw), "line8") {
		t.Fatalf("resumed message on B: %s", msg.raw)
	}
	var out strings.Builder
	var delays []time.Duration
	seenMessage := false
	for i, e := range evs {
		switch e.str("type") {
		case "message":
			seenMessage = true
			if i > 0 {
				t.Logf("message read %s after the line before it", arrived[i].Sub(arrived[i-1]).Round(100*time.Microsecond))
			}
		case "tool_progress":
			if seenMessage {
				t.Fatalf("tool_progress after the message: %s", e.raw)
			}
			if e.str("stream") != "stdout" {
				continue
			}
			if off := int64(e.m["offset"].(float64)); off != int64(out.Len()) {
				t.Fatalf("tool_progress at offset %d after %d bytes: %s", off, out.Len(), e.raw)
			}
			out.WriteString(e.str("text"))
			// ts is when A's progress emitter sent the event (same clock).
			if ts := time.Unix(0, int64(e.m["ts"].(float64)*1e9)); ts.After(since) {
				delays = append(delays, arrived[i].Sub(ts).Round(100*time.Microsecond))
			}
		}
	}
	return out.String(), delays
}

// streamTimed posts a batch to d and reads its NDJSON answer line by line, with the
// time each line was read.
func streamTimed(t *testing.T, d *daemon, path, body string) ([]event, []time.Time) {
	t.Helper()
	req, _ := http.NewRequest("POST", d.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	var evs []event
	var at []time.Time
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			at = append(at, time.Now())
			evs = append(evs, parseNDJSON(t, line)...)
		}
		if err != nil {
			return evs, at
		}
	}
}

// TestReplicaResumeWithAPIKeyHeader: the owner of a resumed call authenticates the
// read of its output with the client's own key, which a client may send as X-API-Key
// rather than Authorization: the resumed stream on B still has A's output.
func TestReplicaResumeWithAPIKeyHeader(t *testing.T) {
	t.Parallel()
	key, hash := auth.NewKey()
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Auth.Unauthenticated = false
		c.Auth.Keys = []config.AuthKeyConfig{{Name: "agent", Tenant: "t1", Roles: []string{auth.RoleAgent}, SHA256: hash}}
	})
	h := http.Header{"X-Api-Key": {key}}
	code, _, body := send(t, http.DefaultClient, "POST", a.url+"/v1/sessions", h, `{"available_tools":["execute_command"]}`)
	if code != http.StatusCreated {
		t.Fatalf("create session: %d %s", code, body)
	}
	var sess struct{ ID string }
	_ = json.Unmarshal(body, &sess)
	path := "/v1/sessions/" + sess.ID + "/tool-calls"
	calls := `[{"id":"k","name":"execute_command","arguments":{"command":"echo one; sleep 0.5; echo two"}}]`

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", a.url+path, strings.NewReader(`{"on_disconnect":"continue","calls":`+calls+`}`))
	req.Header = http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {key}}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadBytes('\n'); err != nil || !strings.Contains(string(line), "tool_start") {
		t.Fatalf("first line %q: %v", line, err)
	}
	cancel()
	resp.Body.Close()

	code, _, out := send(t, http.DefaultClient, "POST", b.url+path, h, `{"resume":true,"calls":`+calls+`}`)
	if code != http.StatusOK {
		t.Fatalf("resume on B: %d %s", code, out)
	}
	evs := parseNDJSON(t, out)
	if m := messages(t, evs)["k"]; m.m["resumed"] != true || !strings.Contains(string(m.raw), "two") {
		t.Fatalf("resumed message on B: %s", m.raw)
	}
	var got strings.Builder
	for _, e := range evs {
		if e.str("type") == "tool_progress" && e.str("stream") == "stdout" {
			got.WriteString(e.str("text"))
		}
	}
	if got.String() != "one\ntwo\n" {
		t.Fatalf("output on B's resumed stream with X-API-Key: %q, want %q", got.String(), "one\ntwo\n")
	}
}
