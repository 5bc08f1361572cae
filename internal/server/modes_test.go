package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

func TestBackgroundMode(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)

	// Follow the session's events, as a UI would.
	resp, err := http.Get(d.url + "/v1/sessions/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	follow := bufio.NewReader(resp.Body)

	start := time.Now()
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[
		{"id":"bg","name":"bg_sleep","arguments":{"ms":150}},
		{"id":"slow","name":"sleep_safe","arguments":{"ms":600}}]}`)
	if code != 200 {
		t.Fatal(code)
	}
	msgs := messages(t, evs)
	handle := msgs["bg"]
	if handle.m["is_error"] != false || !strings.Contains(string(handle.raw), `\"status\":\"running\"`) {
		t.Fatalf("background handle: %s", handle.raw)
	}
	// The result arrived on this (still open) stream as tool_result.
	var onStream []event
	for _, e := range evs {
		if e.str("type") == "tool_result" {
			onStream = append(onStream, e)
		}
	}
	if len(onStream) != 1 || onStream[0].str("tool_call_id") != "bg" || !strings.Contains(string(onStream[0].raw), "background work done") {
		t.Fatalf("tool_result on the open stream: %v", onStream)
	}
	// …and on the session's event stream.
	line, err := follow.ReadBytes('\n')
	if err != nil || !strings.Contains(string(line), `"type":"tool_result"`) || !strings.Contains(string(line), "background work done") {
		t.Fatalf("session events: %q %v", line, err)
	}
	validate(t, "MessageEvent", line)
	// And in the record.
	_, _, rec := d.do("GET", "/v1/tool-calls/"+handle.str("call_id"), nil)
	if !strings.Contains(string(rec), `"succeeded"`) || !strings.Contains(string(rec), "background work done") {
		t.Fatalf("record: %s", rec)
	}
	// The handle said "running" before the work was done: the batch did not wait
	// for it. The bound is a hang guard only.
	t.Logf("batch with a background call, its result and record: %s", time.Since(start))
	if time.Since(start) > 30*time.Second {
		t.Fatal("background call held the batch")
	}
}

func TestStatefulMode(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)
	req, _ := http.NewRequest("POST", d.url+"/v1/sessions/"+id+"/tool-calls", strings.NewReader(`{"calls":[{"id":"c","name":"confirm"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	answers := map[string]string{"proceed?": `"yes"`, "really?": `{"sure":true}`}
	var final string
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		validate(t, "StreamEvent", line)
		var e struct {
			Type    string `json:"type"`
			CallID  string `json:"call_id"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		}
		_ = json.Unmarshal(line, &e)
		if e.Type == "tool_yield" {
			ans, ok := answers[e.Message.Content]
			if !ok {
				t.Fatalf("unexpected question %q", e.Message.Content)
			}
			code, _, body := d.do("POST", "/v1/tool-calls/"+e.CallID+"/input", `{"input":`+ans+`}`)
			if code != 202 {
				t.Fatalf("input: %d %s", code, body)
			}
			// After the last question, another answer is a conflict: nothing waits.
			if e.Message.Content == "really?" {
				if code, _, _ := d.do("POST", "/v1/tool-calls/"+e.CallID+"/input", `{"input":1}`); code != 409 {
					t.Fatalf("answer with nothing waiting: %d", code)
				}
			}
		}
		if e.Type == "message" {
			final = e.Message.Content
		}
		if e.Type == "done" {
			break
		}
	}
	if final != `answers: "yes" {"sure":true}` {
		t.Fatalf("final = %q", final)
	}
	if code, _, _ := d.do("POST", "/v1/tool-calls/tc_nope/input", `{"input":1}`); code != 404 {
		t.Fatalf("unknown call: %d", code)
	}
}

// TestDisconnectKillsForegroundCommand: a client that goes away mid-stream cancels its
// foreground command (the process is killed); a background job goes on.
func TestDisconnectKillsForegroundCommand(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command", "read_job_output"}})
	id, wd := sess["id"].(string), sess["workdir"].(string)

	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"bg","name":"execute_command","arguments":{"command":"echo $$ > bg.pid; seq 1 40 | while read i; do echo $i >> bg.out; sleep 0.05; done","background":true}}]}`)
	if messages(t, evs)["bg"].m["is_error"] != false {
		t.Fatal("background start failed")
	}

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+"/v1/sessions/"+id+"/tool-calls",
		strings.NewReader(`{"calls":[{"id":"fg","name":"execute_command","arguments":{"command":"echo $$ > fg.pid; echo started; sleep 60"}}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for { // wait until the command has started writing
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, "started") {
			break
		}
	}
	pid := readPID(t, filepath.Join(wd, "fg.pid"))
	cancel()
	resp.Body.Close()
	waitFor(t, 30*time.Second, "foreground command killed after disconnect", func() bool { return !alive(pid) })

	// The background job kept running and finished its work.
	waitFor(t, 30*time.Second, "background job finished", func() bool {
		b, _ := os.ReadFile(filepath.Join(wd, "bg.out"))
		return strings.HasSuffix(string(b), "\n40\n")
	})
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, 30*time.Second, "pid file "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie (state Z) has exited.
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSessionEventsCarryApprovals checks GET /v1/sessions/{id}/events against its
// documented schema when a background call waits for approval: the approval_required
// line goes to the session's streams, as its result does later.
func TestSessionEventsCarryApprovals(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Permissions.Allow = slices.DeleteFunc(c.Permissions.Allow, func(r string) bool { return r == "bg_sleep" })
		c.Permissions.Ask = []string{"bg_sleep"}
	}})
	id := d.createSession(map[string]any{})["id"].(string)
	resp, err := http.Get(d.url + "/v1/sessions/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	follow := bufio.NewReader(resp.Body)
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"bg","name":"bg_sleep","arguments":{"ms":10}}]}`)
	if code != 200 || messages(t, evs)["bg"].m["is_error"] != false {
		t.Fatalf("%d %v", code, evs)
	}
	line, err := follow.ReadBytes('\n')
	if err != nil || !strings.Contains(string(line), `"type":"approval_required"`) {
		t.Fatalf("session events: %q %v", line, err)
	}
	validateResponse(t, "GET", "/v1/sessions/{sessionID}/events", "200", "application/x-ndjson", line)
}
