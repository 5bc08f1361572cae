package server_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCommandToolsAnswerTheirDeadline: a request's timeout_ms shorter than a command
// (a backend sending "timeout_ms": 30000 with a test suite that runs longer) ended
// execute_command with only "execute_command did not finish within 30s and was
// stopped", the output it printed dropped, so the model could not see where it
// stood; and an await_job told to wait longer than the request's timeout_ms answered
// the same words, which read as if the job had been stopped, not its wait. Both now
// answer before the call's deadline: the command as timed out with its output so
// far, the wait with the job still running and what it printed.
func TestCommandToolsAnswerTheirDeadline(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command", "await_job", "kill_job"}})
	id := sess["id"].(string)
	call := func(body string) (isErr bool, kind, content string, structured json.RawMessage) {
		t.Helper()
		code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", body)
		if code != 200 {
			t.Fatalf("%d %s", code, evs[0].raw)
		}
		m := messages(t, evs)["c"]
		msg, _ := m.m["message"].(map[string]any)
		content, _ = msg["content"].(string)
		structured, _ = json.Marshal(msg["structured"])
		return m.m["is_error"] == true, m.str("error_kind"), content, structured
	}

	isErr, kind, content, _ := call(`{"timeout_ms":5000,"calls":[{"id":"c","name":"execute_command","arguments":{"command":"echo started; sleep 60","timeout_ms":60000}}]}`)
	if !isErr || kind != "timeout" || !strings.Contains(content, "started") {
		t.Errorf("a command past the request's timeout_ms: is_error=%v kind=%q %q, want a timeout showing the output so far", isErr, kind, content)
	}

	// One that ignores SIGTERM outlives the kill grace (2 s), which is longer than
	// the margin before the call's deadline: it is answered while it is being killed.
	isErr, kind, content, _ = call(`{"timeout_ms":5000,"calls":[{"id":"c","name":"execute_command","arguments":{"command":"python3 -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(\"stubborn\", flush=True); time.sleep(60)'","timeout_ms":60000}}]}`)
	if !isErr || kind != "timeout" || !strings.Contains(content, "stubborn") {
		t.Errorf("a command ignoring SIGTERM past the request's timeout_ms: is_error=%v kind=%q %q, want a timeout showing the output so far", isErr, kind, content)
	}

	isErr, _, content, structured := call(`{"calls":[{"id":"c","name":"execute_command","arguments":{"command":"echo begun; sleep 60","background":true}}]}`)
	var job struct {
		JobID string `json:"job_id"`
	}
	if isErr || json.Unmarshal(structured, &job) != nil || job.JobID == "" {
		t.Fatalf("background command: %q %s", content, structured)
	}
	defer call(`{"calls":[{"id":"c","name":"kill_job","arguments":{"job_id":"` + job.JobID + `"}}]}`)
	isErr, kind, content, structured = call(`{"timeout_ms":5000,"calls":[{"id":"c","name":"await_job","arguments":{"job_id":"` + job.JobID + `","timeout_ms":60000}}]}`)
	var awaited struct {
		Status string `json:"status"`
		Stdout string `json:"stdout"`
	}
	if isErr || json.Unmarshal(structured, &awaited) != nil || awaited.Status != "running" || awaited.Stdout != "begun\n" ||
		!strings.Contains(content, "still running") {
		t.Errorf("await_job waiting past the request's timeout_ms: is_error=%v kind=%q %q %s, want the job still running with its output", isErr, kind, content, structured)
	}
}
