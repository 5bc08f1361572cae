package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProgressFollowsBackgroundJob: the call that starts a background job answers at
// once, but its progress carries the job's output for as long as the job runs, as a
// web UI polling it expects: not finished while the job runs, every byte in order, and
// finished once the job has exited. The NDJSON stream that carried the call still
// ends the call's progress with its message (closed, nothing after it).
func TestProgressFollowsBackgroundJob(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	ses := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})
	id, dir := ses["id"].(string), ses["workdir"].(string)
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": []any{
		map[string]any{"id": "c1", "name": "execute_command", "arguments": map[string]any{
			"command": "sleep 0.2; echo one; while [ ! -e go ]; do sleep 0.02; done; echo two; echo warn >&2", "background": true}},
		// Runs while the job prints its first line: the stream is still open then.
		map[string]any{"id": "c2", "name": "execute_command", "arguments": map[string]any{"command": "sleep 1"}},
	}})
	if code != 200 {
		t.Fatal(code)
	}
	msg := messages(t, evs)["c1"]
	if msg.m["is_error"] != false || !strings.Contains(string(msg.raw), "job_") {
		t.Fatalf("message: %s", msg.raw)
	}
	after := false
	for _, e := range evs {
		if e.str("type") == "message" && e.str("tool_call_id") == "c1" {
			after = true
		} else if after && e.str("type") == "tool_progress" && e.str("tool_call_id") == "c1" {
			t.Fatalf("tool_progress of c1 after its message: %s", e.raw)
		}
	}
	tc := msg.str("call_id")

	type chunk struct {
		Data       string `json:"data"`
		NextOffset int64  `json:"next_offset"`
		Finished   bool   `json:"finished"`
	}
	get := func(stream string, off int64) chunk {
		t.Helper()
		code, _, body := d.do("GET", "/v1/tool-calls/"+tc+"/progress?stream="+stream+"&offset="+strconv.FormatInt(off, 10), nil)
		if code != 200 {
			t.Fatalf("poll: %d %s", code, body)
		}
		validate(t, "ProgressChunk", body)
		var ch chunk
		if err := json.Unmarshal(body, &ch); err != nil {
			t.Fatal(err)
		}
		return ch
	}
	// While the job waits: its first line, and not finished.
	var out string
	var off int64
	for deadline := time.Now().Add(10 * time.Second); out != "one\n"; {
		ch := get("stdout", off)
		if ch.Finished {
			t.Fatalf("progress says finished while the job still runs (read %q)", out+ch.Data)
		}
		out, off = out+ch.Data, ch.NextOffset
		if time.Now().After(deadline) {
			t.Fatalf("job output %q after 10 s, want %q", out, "one\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if ch := get("stdout", off); ch.Finished || ch.Data != "" {
		t.Fatalf("while the job waits: %+v", ch)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		ch := get("stdout", off)
		out, off = out+ch.Data, ch.NextOffset
		if ch.Finished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not finished 10 s after the job was let go (read %q)", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out != "one\ntwo\n" {
		t.Errorf("stdout %q, want %q", out, "one\ntwo\n")
	}
	if ch := get("stderr", 0); ch.Data != "warn\n" || !ch.Finished {
		t.Errorf("stderr: %+v", ch)
	}

	// A browser following the call of a job that has printed nothing yet waits for
	// the job's output rather than being told, after a while, that the call is over.
	code, evs = d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": []any{
		map[string]any{"id": "c3", "name": "execute_command", "arguments": map[string]any{
			"command": "while [ ! -e go2 ]; do sleep 0.02; done; echo late", "background": true}},
	}})
	if code != 200 {
		t.Fatal(code)
	}
	tc = messages(t, evs)["c3"].str("call_id")
	got := make(chan string, 1)
	go func() {
		text, _ := readSSE(t, d, tc, "")
		got <- text
	}()
	select {
	case text := <-got:
		t.Fatalf("SSE stream closed while the job runs (text %q)", text)
	case <-time.After(2500 * time.Millisecond): // past the stream's 2 s check of the record
	}
	if err := os.WriteFile(filepath.Join(dir, "go2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case text := <-got:
		if text != "late\n" {
			t.Errorf("SSE text %q, want %q", text, "late\n")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SSE stream not closed 10 s after the job was let go")
	}
}
