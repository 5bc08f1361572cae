package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// TestListLiveCallsWithBackgroundJobs: a call that started a background job has
// answered (succeeded) but its output streams on; GET /v1/tool-calls?live=true lists
// it, marked output_open, until the job ends (exits, or is killed), and pages like
// any listing. status=pending,running,waiting still lists only unfinished calls.
func TestListLiveCallsWithBackgroundJobs(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	ses := d.createSession(map[string]any{"available_tools": []string{"execute_command", "kill_job", "echo"}})
	id, dir := ses["id"].(string), ses["workdir"].(string)
	run := func(calls ...any) map[string]event {
		t.Helper()
		code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": calls})
		if code != 200 {
			t.Fatal(code)
		}
		return messages(t, evs)
	}
	bg := func(callID, command string) map[string]any {
		return map[string]any{"id": callID, "name": "execute_command", "arguments": map[string]any{"command": command, "background": true}}
	}
	jobID := regexp.MustCompile(`job_[A-Za-z0-9_-]+`)
	m := run(bg("j1", "echo one; while [ ! -e go ]; do sleep 0.02; done; echo two"))
	tc1, job1 := m["j1"].str("call_id"), jobID.FindString(string(m["j1"].raw))
	m = run(bg("j2", "sleep 600"), map[string]any{"id": "e", "name": "echo", "arguments": map[string]any{"text": "hi"}})
	tc2, job2 := m["j2"].str("call_id"), jobID.FindString(string(m["j2"].raw))
	if job1 == "" || job2 == "" {
		t.Fatalf("no job ids in %s / %s", m["j1"].raw, m["j2"].raw)
	}

	list := func(query string) []map[string]any { return listCalls(t, d, query) }
	ids := func(calls []map[string]any) []string {
		out := []string{}
		for _, c := range calls {
			out = append(out, c["id"].(string))
		}
		return out
	}
	same := func(what string, got, want []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: %v, want %v", what, got, want)
			}
		}
	}
	// waitLive polls the live listing until it is want (a job's end is recorded
	// just after its output closes).
	waitLive := func(want ...string) {
		t.Helper()
		var got []string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if got = ids(list("?live=true")); len(got) == len(want) {
				break
			}
		}
		same("live calls", got, want)
	}

	live := list("?live=true")
	same("live calls", ids(live), []string{tc2, tc1})
	for _, c := range live {
		if c["status"] != "succeeded" || c["output_open"] != true {
			t.Errorf("live call: %v", c)
		}
	}
	same("unfinished calls", ids(list("?status=pending,running,waiting")), []string{})
	all := list("")
	if len(all) != 3 {
		t.Fatalf("all calls: %v", all)
	}
	for _, c := range all {
		if open := c["id"] != m["e"].str("call_id"); c["output_open"] != open {
			t.Errorf("output_open of %s: %v, want %v", c["name"], c["output_open"], open)
		}
	}
	same("live page 1", ids(list("?live=true&limit=1")), []string{tc2})
	same("live page 2", ids(list("?live=true&limit=1&before="+tc2)), []string{tc1})
	same("live and failed", ids(list("?live=true&status=failed")), []string{})
	if code, _, body := d.do("GET", "/v1/tool-calls?live=yes", nil); code != http.StatusBadRequest {
		t.Fatalf("live=yes: %d %s", code, body)
	}

	// The first job exits: its call leaves the live list, its record says the output
	// is closed.
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitLive(tc2)
	code, _, body := d.do("GET", "/v1/tool-calls/"+tc1, nil)
	var rec map[string]any
	if err := json.Unmarshal(body, &rec); code != 200 || err != nil || rec["output_open"] != false || rec["status"] != "succeeded" {
		t.Fatalf("record of the ended job's call: %d %s", code, body)
	}

	// The second is killed.
	run(map[string]any{"id": "k", "name": "kill_job", "arguments": map[string]any{"job_id": job2}})
	waitLive()
}

// TestStopEndsOutputOfJobs: a daemon that stops ends its background jobs, and the
// records of their calls say their output is closed before the store closes (not only
// at the next start).
func TestStopEndsOutputOfJobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{dataDir: dir})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": []any{map[string]any{
		"id": "j", "name": "execute_command", "arguments": map[string]any{"command": "sleep 600", "background": true}}}})
	if code != 200 {
		t.Fatal(code)
	}
	tc := messages(t, evs)["j"].str("call_id")
	if c, err := d.app.Store.GetCall(t.Context(), tc); err != nil || !c.OutputOpen {
		t.Fatalf("while the job runs: %+v %v", c, err)
	}
	d.stop()

	s, err := store.Open(t.Context(), store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, err := s.GetCall(t.Context(), tc); err != nil || c.OutputOpen || c.Status != store.CallSucceeded {
		t.Fatalf("after the daemon stopped: %+v %v", c, err)
	}
}
