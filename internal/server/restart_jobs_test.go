package server_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestJobAfterRestartSaysWhy: a restart of the daemon ends the background jobs it ran.
// With SQLite no other replica knows them, so await_job, read_job_output and kill_job
// of such a job answered only `no job "job_…" in this session`, which the model, which
// started it a turn ago, cannot act on. They now say that jobs from before the session
// was loaded anew have ended and to start the job again. A session this process made
// keeps the plain words.
func TestJobAfterRestartSaysWhy(t *testing.T) {
	t.Parallel()
	opts := daemonOpts{dataDir: t.TempDir()}
	d := startDaemon(t, opts)
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command", "await_job", "read_job_output", "kill_job"}})
	id := sess["id"].(string)
	call := func(d *daemon, session, cid, name string, args map[string]any) (bool, string, json.RawMessage) {
		t.Helper()
		code, evs := d.stream("/v1/sessions/"+session+"/tool-calls", map[string]any{"calls": []any{map[string]any{"id": cid, "name": name, "arguments": args}}})
		if code != 200 {
			t.Fatalf("%s: %d %s", name, code, evs[0].raw)
		}
		m := messages(t, evs)[cid]
		msg, _ := m.m["message"].(map[string]any)
		content, _ := msg["content"].(string)
		structured, _ := json.Marshal(msg["structured"])
		return m.m["is_error"] == true, content, structured
	}
	isErr, content, structured := call(d, id, "x", "execute_command", map[string]any{"command": "sleep 60", "background": true})
	var started struct {
		JobID string `json:"job_id"`
	}
	if isErr || json.Unmarshal(structured, &started) != nil || started.JobID == "" {
		t.Fatalf("execute_command in the background: %q %s", content, structured)
	}
	d.stop()

	d2 := startDaemon(t, opts)
	for _, name := range []string{"await_job", "read_job_output", "kill_job"} {
		isErr, content, _ := call(d2, id, name, name, map[string]any{"job_id": started.JobID})
		if !isErr || !strings.Contains(content, started.JobID) || !strings.Contains(content, "restarted") ||
			!strings.Contains(content, "start it again") {
			t.Errorf("%s of a job from before the restart: is_error=%v %q, want not found saying jobs from before the daemon restarted have ended and to start it again", name, isErr, content)
		}
	}

	fresh := d2.createSession(map[string]any{"available_tools": []string{"await_job"}})
	isErr, content, _ = call(d2, fresh["id"].(string), "a", "await_job", map[string]any{"job_id": "job_0123456789abcdef"})
	if !isErr || strings.Contains(content, "restarted") {
		t.Errorf("await_job of an unknown job in a session this process made: is_error=%v %q, want not found without a word of restarts", isErr, content)
	}
}
