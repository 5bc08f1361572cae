package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/cluster"
	"github.com/toolserverd/toolserverd/internal/config"
)

// TestJobsReachedThroughAnotherReplica: two daemons with API keys on one PostgreSQL
// serve one session. A background job started through replica A is read and killed
// through replica B (B forwards the job tools' calls to A with the caller's key), the
// kill is seen on A, another tenant's key cannot use the forwarding route, and once A
// is gone B answers with an unavailable error that names A.
func TestJobsReachedThroughAnotherReplica(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	key, hash := auth.NewKey()
	otherKey, otherHash := auth.NewKey()
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Sessions.WorkdirRoots = []string{shared}
		c.Auth.Unauthenticated = false
		c.Auth.Keys = []config.AuthKeyConfig{
			{Name: "agent", Tenant: "t1", Roles: []string{auth.RoleAgent}, SHA256: hash},
			{Name: "other", Tenant: "t2", Roles: []string{auth.RoleAgent}, SHA256: otherHash},
		}
	})
	code, _, body := keyed(t, a, key, "POST", "/v1/sessions", fmt.Sprintf(`{"available_tools":["execute_command","await_job","read_job_output","kill_job"],"workdir":%q}`, shared))
	if code != 201 {
		t.Fatalf("create session: %d %s", code, body)
	}
	var sess struct{ ID string }
	_ = json.Unmarshal(body, &sess)

	// call runs one call through d and returns its message.
	call := func(d *daemon, name, args string) event { t.Helper(); return keyedCall(t, d, key, sess.ID, name, args) }
	structured := func(m event) map[string]any { t.Helper(); return structuredOf(t, m) }
	var startedBy string // the call that started the last job
	startJob := func() string {
		t.Helper()
		m := call(a, "execute_command", `{"command":"echo job-started; while :; do sleep 0.1; done","background":true}`)
		startedBy = m.str("call_id")
		s := structured(m)
		id, _ := s["job_id"].(string)
		if !strings.HasPrefix(id, "job_") {
			t.Fatalf("no job id: %v", s)
		}
		return id
	}
	jobID := startJob()
	args := fmt.Sprintf(`{"job_id":%q}`, jobID)
	// liveOn lists the live calls through d: the job's call, finished at once, is
	// live on every replica while the job runs on A.
	liveOn := func(d *daemon) string {
		t.Helper()
		code, _, out := keyed(t, d, key, "GET", "/v1/tool-calls?live=true", "")
		if code != 200 {
			t.Fatalf("live calls through %s: %d %s", d.url, code, out)
		}
		return string(out)
	}
	if out := liveOn(b); !strings.Contains(out, startedBy) || !strings.Contains(out, `"output_open":true`) {
		t.Fatalf("live calls through B while the job runs on A: %s", out)
	}

	// B has no such job itself; it reads A's output log through A.
	waitFor(t, 30*time.Second, "A's job output read through B", func() bool {
		s := structured(call(b, "read_job_output", args))
		return s["data"] == "job-started\n" && s["status"] == "running"
	})
	if s := structured(call(b, "await_job", fmt.Sprintf(`{"job_id":%q,"timeout_ms":0}`, jobID))); s["status"] != "running" || s["stdout"] != "job-started\n" {
		t.Fatalf("await_job through B: %v", s)
	}
	// Kill through B; A's own view shows the job killed.
	if s := structured(call(b, "kill_job", args)); s["status"] != "killed" {
		t.Fatalf("kill_job through B: %v", s)
	}
	if s := structured(call(a, "read_job_output", args)); s["status"] != "killed" || s["eof"] != true {
		t.Fatalf("the job on A after the kill through B: %v", s)
	}
	waitFor(t, 30*time.Second, "the killed job's call no longer live through B", func() bool {
		return !strings.Contains(liveOn(b), startedBy)
	})

	// The forwarding route checks the key's tenant like any other route, and is only
	// for forwarded calls.
	route := "/v1/sessions/" + sess.ID + "/job-calls"
	jobCall := fmt.Sprintf(`{"name":"read_job_output","arguments":%s}`, args)
	forwardAs := func(k string) (int, []byte) {
		req, err := http.NewRequest("POST", a.url+route, strings.NewReader(jobCall))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+k)
		req.Header.Set(cluster.ForwardedHeader, "replica-b")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	if code, out := forwardAs(otherKey); code != 404 {
		t.Fatalf("another tenant's key on the job route: %d %s", code, out)
	}
	// A client cannot use the route to skip the permission policy: the call must be
	// on record, running, in this session, for this tool with these arguments.
	if code, out := forwardAs(key); code != 400 || !strings.Contains(string(out), "call_id") {
		t.Fatalf("a forged forwarded call without a call id: %d %s", code, out)
	}
	finished := call(b, "read_job_output", args).str("call_id")
	for _, id := range []string{"tc_doesnotexist", finished} {
		jobCall = fmt.Sprintf(`{"call_id":%q,"name":"kill_job","arguments":%s}`, id, args)
		if code, out := forwardAs(key); code != 403 {
			t.Fatalf("a forged forwarded kill_job with call id %s: %d %s", id, code, out)
		}
	}
	jobCall = fmt.Sprintf(`{"name":"read_job_output","arguments":%s}`, args)
	if code, _, out := keyed(t, a, "", "POST", route, jobCall); code != 401 {
		t.Fatalf("no key on the job route: %d %s", code, out)
	}
	if code, _, out := keyed(t, a, key, "POST", route, jobCall); code != 400 {
		t.Fatalf("an unforwarded call on the job route: %d %s", code, out)
	}
	// A job of another session is not found through B either.
	if m := call(b, "read_job_output", `{"job_id":"job_0000000000000000"}`); m.m["is_error"] != true || m.m["error_kind"] != "not_found" {
		t.Fatalf("an unknown job through B: %s", m.raw)
	}

	// With A gone, B says where the job ran and that it is out of reach.
	second := startJob()
	a.stop()
	m := call(b, "read_job_output", fmt.Sprintf(`{"job_id":%q}`, second))
	if m.m["is_error"] != true || m.m["error_kind"] != "unavailable" || !strings.Contains(string(m.raw), "replica-a") {
		t.Fatalf("a job of a stopped replica through B: %s", m.raw)
	}
}

// keyedCall runs one call of name with args in session sess through d, authenticated
// with key, and returns its message.
func keyedCall(t *testing.T, d *daemon, key, sess, name, args string) event {
	t.Helper()
	code, _, out := keyed(t, d, key, "POST", "/v1/sessions/"+sess+"/tool-calls",
		fmt.Sprintf(`{"calls":[{"id":"c","name":%q,"arguments":%s}]}`, name, args))
	if code != 200 {
		t.Fatalf("%s on %s: %d %s", name, d.url, code, out)
	}
	return messages(t, parseNDJSON(t, out))["c"]
}

// structuredOf is the structured output of a successful call's message.
func structuredOf(t *testing.T, m event) map[string]any {
	t.Helper()
	if m.m["is_error"] != false {
		t.Fatalf("error result: %s", m.raw)
	}
	msg, _ := m.m["message"].(map[string]any)
	s, ok := msg["structured"].(map[string]any)
	if !ok {
		t.Fatalf("no structured result: %s", m.raw)
	}
	return s
}
