package server_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// postAndDrop posts a batch, reads its first line (the first tool_start) and goes
// away, as a client whose connection dropped.
func postAndDrop(t *testing.T, d *daemon, sess, body string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+"/v1/sessions/"+sess+"/tool-calls", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post: %d", resp.StatusCode)
	}
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil || !strings.Contains(string(line), "tool_start") {
		t.Fatalf("first line %q: %v", line, err)
	}
}

// TestResumeAfterDisconnect: a backend whose connection drops mid-batch sends the
// batch again with resume. With on_disconnect: continue the first request's command
// ran to its end, once, and the second request gets its result; sending the batch
// again without resume runs it again.
func TestResumeAfterDisconnect(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command", "echo"}})
	id, workdir := sess["id"].(string), sess["workdir"].(string)
	path := "/v1/sessions/" + id + "/tool-calls"
	calls := `[{"id":"x1","name":"execute_command","arguments":{"command":"echo run >> runs.txt; sleep 0.5; wc -l < runs.txt"}}]`

	postAndDrop(t, d, id, `{"on_disconnect":"continue","calls":`+calls+`}`)
	code, evs := d.stream(path, `{"resume":true,"calls":`+calls+`}`)
	if code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, evs[0].raw)
	}
	msgs := messages(t, evs)
	x1 := msgs["x1"]
	if x1.m["resumed"] != true || x1.m["is_error"] != false || !strings.Contains(jsonOf(x1.m["message"]), `stdout:\n1`) {
		t.Fatalf("resumed message: %s", x1.raw)
	}
	if evs[0].str("type") != "tool_start" || evs[0].m["resumed"] != true {
		t.Fatalf("first line: %s", evs[0].raw)
	}
	runs := func() int {
		b, err := os.ReadFile(filepath.Join(workdir, "runs.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "run\n")
	}
	if n := runs(); n != 1 {
		t.Fatalf("the command ran %d times, want 1", n)
	}

	// Once more: the same record, not a third run.
	_, evs = d.stream(path, `{"resume":true,"calls":`+calls+`}`)
	if again := messages(t, evs)["x1"]; again.str("call_id") != x1.str("call_id") || again.m["resumed"] != true {
		t.Fatalf("second resume: %s, want the record %s", again.raw, x1.str("call_id"))
	}
	if n := runs(); n != 1 {
		t.Fatalf("after a second resume the command ran %d times, want 1", n)
	}
	// Without resume, the same id is a new call.
	_, evs = d.stream(path, `{"calls":`+calls+`}`)
	if m := messages(t, evs)["x1"]; m.m["resumed"] != nil || !strings.Contains(jsonOf(m.m["message"]), `stdout:\n2`) {
		t.Fatalf("without resume: %s", m.raw)
	}
}

// TestResumeFollowsRunningCallThenRunsNewOnes: a resumed call that is still running is
// followed to its end, and the calls of the batch not on record run after it.
func TestResumeFollowsRunningCallThenRunsNewOnes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)
	path := "/v1/sessions/" + id + "/tool-calls"

	postAndDrop(t, d, id, `{"on_disconnect":"continue","calls":[{"id":"b","name":"block"}]}`)
	blockCall := <-d.tools.blockStarts
	out := make(chan []event, 1)
	go func() {
		_, e := d.stream(path, `{"resume":true,"calls":[{"id":"b","name":"block"},{"id":"e","name":"echo","arguments":{"text":"after"}}]}`)
		out <- e
	}()
	// The blocked call is still running although its client left; the resumed request
	// waits for it and does not start it again.
	select {
	case again := <-d.tools.blockStarts:
		t.Fatalf("resume started the block tool again (%s)", again)
	case e := <-out:
		t.Fatalf("resumed stream ended while the call ran: %s", rawLines(e))
	case <-time.After(300 * time.Millisecond):
	}
	if rec := record(t, d, id, "b"); rec["status"] != "running" {
		t.Fatalf("the detached call's record: %v, want running", rec)
	}
	close(d.tools.release)
	evs := <-out
	msgs := messages(t, evs)
	if msgs["b"].str("call_id") != blockCall || msgs["b"].m["resumed"] != true || !strings.Contains(string(msgs["b"].raw), "released") {
		t.Fatalf("b: %s", msgs["b"].raw)
	}
	if msgs["e"].m["resumed"] != nil || msgs["e"].m["is_error"] != false {
		t.Fatalf("e: %s", msgs["e"].raw)
	}
	bDone, eStart := -1, -1
	for i, e := range evs {
		switch {
		case e.str("type") == "message" && e.str("tool_call_id") == "b":
			bDone = i
		case e.str("type") == "tool_start" && e.str("tool_call_id") == "e":
			eStart = i
		}
	}
	if eStart < bDone {
		t.Fatalf("the new call started (line %d) before the resumed one ended (line %d)", eStart, bDone)
	}
}

// TestResumeCancelledCall: by default a client that goes away cancels its calls, and
// a resumed batch gets that recorded outcome rather than running the call again.
func TestResumeCancelledCall(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)
	path := "/v1/sessions/" + id + "/tool-calls"

	postAndDrop(t, d, id, `{"calls":[{"id":"b","name":"block"}]}`)
	<-d.tools.blockStarts
	_, evs := d.stream(path, `{"resume":true,"timeout_ms":5000,"calls":[{"id":"b","name":"block"}]}`)
	m := messages(t, evs)["b"]
	if m.m["resumed"] != true || m.str("error_kind") != "cancelled" {
		t.Fatalf("resumed cancelled call: %s", m.raw)
	}
	select {
	case again := <-d.tools.blockStarts:
		t.Fatalf("resume ran the cancelled call again (%s)", again)
	default:
	}
}

// TestResumeBadRequests: what resume and on_disconnect refuse, before anything runs.
func TestResumeBadRequests(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)
	path := "/v1/sessions/" + id + "/tool-calls"
	if _, evs := d.stream(path, `{"calls":[{"id":"c1","name":"echo","arguments":{"text":"first"}}]}`); messages(t, evs)["c1"].m["is_error"] != false {
		t.Fatalf("first call: %v", evs)
	}
	for _, tc := range []struct{ name, path, body, want string }{
		{"same id, other tool", path, `{"resume":true,"calls":[{"id":"c1","name":"whoami"}]}`, "is on record in this session for a call of echo, not whoami"},
		{"duplicate ids", path, `{"resume":true,"calls":[{"id":"c1","name":"echo"},{"id":"c1","name":"echo"}]}`, "unique in a batch"},
		{"one-shot", "/v1/tool-calls", `{"resume":true,"session":{},"calls":[{"id":"c1","name":"echo"}]}`, "resume needs the session"},
		{"on_disconnect", path, `{"on_disconnect":"detach","calls":[{"id":"c2","name":"echo"}]}`, "on_disconnect must be cancel or continue"},
		{"one-shot on_disconnect", "/v1/tool-calls", `{"on_disconnect":"later","session":{},"calls":[{"id":"c2","name":"echo"}]}`, "on_disconnect must be cancel or continue"},
		{"on_disconnect type", path, `{"on_disconnect":true,"calls":[{"id":"c2","name":"echo"}]}`, "on_disconnect"},
	} {
		code, _, body := d.do("POST", tc.path, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.name, code, body, tc.want)
		}
	}
	if rec := record(t, d, id, "c1"); !strings.Contains(jsonOf(rec["result"]), "first") {
		t.Fatalf("c1's record changed: %v", rec)
	}
}

// TestDetachedCallEndsWithTheDaemon: a call that outlives its client still ends when
// the daemon stops (after the drain), and its record says it was cancelled.
func TestDetachedCallEndsWithTheDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{dataDir: dir, mutate: func(c *config.Config) { c.ShutdownTimeout = 300 * time.Millisecond }})
	id := d.createSession(map[string]any{})["id"].(string)
	postAndDrop(t, d, id, `{"on_disconnect":"continue","calls":[{"id":"b","name":"block"}]}`)
	<-d.tools.blockStarts
	stopped := make(chan struct{})
	go func() { d.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Fatal("the daemon did not stop with a detached call running")
	}
	d2 := startDaemon(t, daemonOpts{dataDir: dir})
	rec := record(t, d2, id, "b")
	if rec["status"] != "failed" || rec["error_kind"] != "cancelled" || rec["finished_at"] == nil {
		t.Fatalf("record of the detached call after the daemon stopped: %v", rec)
	}
}
