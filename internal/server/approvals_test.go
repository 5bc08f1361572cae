package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// streamUntilApproval posts a batch and reads it until its first approval_required
// event; the rest of the stream is returned on a channel.
func streamUntilApproval(t *testing.T, d *daemon, path, body string) (approval map[string]any, rest <-chan []event, cancel func()) {
	t.Helper()
	e, rest, cancel := streamUntilEvent(t, d, path, body, "approval_required")
	return e["approval"].(map[string]any), rest, cancel
}

// streamUntilEvent posts body to path and reads the NDJSON answer up to the first
// event of type typ, which it returns; the rest of the stream arrives on rest.
func streamUntilEvent(t *testing.T, d *daemon, path, body, typ string) (ev map[string]any, rest <-chan []event, cancel func()) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("stream ended before %s: %v", typ, err)
		}
		validate(t, "StreamEvent", line)
		_ = json.Unmarshal(line, &ev)
		if ev["type"] == typ {
			break
		}
		ev = nil
	}
	out := make(chan []event, 1)
	go func() {
		defer resp.Body.Close()
		b, _ := readRest(br)
		out <- parseNDJSON(t, b)
	}()
	return ev, out, stop
}

// getUntilEvent reads the NDJSON answer of GET path up to the first event of type
// typ, which it returns; the rest of the stream arrives on rest.
func getUntilEvent(t *testing.T, d *daemon, path, typ string) (ev map[string]any, rest <-chan []event) {
	t.Helper()
	resp, err := http.Get(d.url + path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	br := bufio.NewReader(resp.Body)
	var seen []byte
	for ev == nil || ev["type"] != typ {
		line, err := br.ReadBytes('\n')
		seen = append(seen, line...)
		if err != nil {
			t.Fatalf("stream ended before %s: %v (HTTP %d: %s)", typ, err, resp.StatusCode, seen)
		}
		ev = nil
		_ = json.Unmarshal(line, &ev)
	}
	out := make(chan []event, 1)
	go func() {
		b, _ := readRest(br)
		out <- parseNDJSON(t, b)
	}()
	return ev, out
}

func readRest(br *bufio.Reader) ([]byte, error) {
	var all []byte
	for {
		line, err := br.ReadBytes('\n')
		all = append(all, line...)
		if err != nil {
			return all, nil
		}
	}
}

func lines(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestApprovalFlow(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})
	id, wd := sess["id"].(string), sess["workdir"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"

	// A read-only command runs without asking.
	_, evs := d.stream(calls, `{"calls":[{"id":"ro","name":"execute_command","arguments":{"command":"ls -la && git status 2>/dev/null; echo ok"}}]}`)
	if m := messages(t, evs)["ro"]; m.m["is_error"] != false {
		t.Fatalf("read-only command: %s", m.raw)
	}

	// A writing command asks; the approver sees it pending, approves for the session.
	apr, rest, stop := streamUntilApproval(t, d, calls, `{"calls":[{"id":"w1","name":"execute_command","arguments":{"command":"echo ran >> ran.txt"}}]}`)
	defer stop()
	if apr["risk"] == "" || apr["reason"] == "" || len(apr["suggestions"].([]any)) == 0 {
		t.Fatalf("approval_required lacks risk, reason or suggestions: %v", apr)
	}
	code, _, body := d.do("GET", "/v1/approvals?status=pending", nil)
	if code != 200 || !strings.Contains(string(body), apr["id"].(string)) || !strings.Contains(string(body), "ran.txt") {
		t.Fatalf("pending list: %d %s", code, body)
	}
	if lines(t, filepath.Join(wd, "ran.txt")) != 0 {
		t.Fatal("the command ran before approval")
	}
	code, _, body = d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve_for_session","actor":"ada"}`)
	if code != 200 || !strings.Contains(string(body), `"approved"`) || !strings.Contains(string(body), `"actor":"ada"`) {
		t.Fatalf("decide: %d %s", code, body)
	}
	validate(t, "Approval", body)
	msgs := restMessages(t, <-rest)
	if msgs["w1"].m["is_error"] != false {
		t.Fatalf("approved call: %s", msgs["w1"].raw)
	}
	if code, _, _ := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"deny"}`); code != 409 {
		t.Fatalf("second decision: %d", code)
	}
	// The session rule now allows the same kind of command without asking.
	_, evs = d.stream(calls, `{"calls":[{"id":"w2","name":"execute_command","arguments":{"command":"echo ran >> ran.txt"}}]}`)
	if m := messages(t, evs)["w2"]; m.m["is_error"] != false {
		t.Fatalf("after approve_for_session: %s", m.raw)
	}
	if n := lines(t, filepath.Join(wd, "ran.txt")); n != 2 {
		t.Fatalf("ran.txt has %d lines, want 2 (each call exactly once)", n)
	}
	code, _, body = d.do("GET", "/v1/sessions/"+id, nil)
	if !strings.Contains(string(body), "execute_command(echo") {
		t.Fatalf("session rule not persisted: %s", body)
	}

	// A denial reaches the model with the approver's reason; nothing runs.
	apr, rest, stop2 := streamUntilApproval(t, d, calls, `{"calls":[{"id":"rm","name":"execute_command","arguments":{"command":"rm -rf build/ && git push --force"}}]}`)
	defer stop2()
	if apr["risk"] != "high" && apr["risk"] != "critical" {
		t.Fatalf("destructive command risk = %v", apr["risk"])
	}
	code, _, _ = d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"deny","reason":"never force-push main","actor":"bob"}`)
	if code != 200 {
		t.Fatal(code)
	}
	m := restMessages(t, <-rest)["rm"]
	if m.str("error_kind") != "denied" || !strings.Contains(string(m.raw), "never force-push main") {
		t.Fatalf("denied message: %s", m.raw)
	}

	// Bad decisions.
	for _, bad := range []string{`{"decision":"maybe"}`, `{"decision":"approve_with_rule","rule":"execute_command(*)"}`} {
		if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", bad); code != 400 && code != 409 {
			t.Fatalf("%s: %d %s", bad, code, body)
		}
	}
	if code, _, _ := d.do("GET", "/v1/approvals/apr_nope", nil); code != 404 {
		t.Fatalf("unknown approval: %d", code)
	}
}

func TestApprovalLongPollAndDontAsk(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)

	got := make(chan []byte, 1)
	start := time.Now()
	go func() {
		_, _, body := d.do("GET", "/v1/approvals?status=pending&wait=1m", nil)
		got <- body
	}()
	time.Sleep(200 * time.Millisecond) // the poll is waiting with nothing pending
	_, _, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"touch x"}}]}`)
	defer stop()
	body := <-got
	// Woken by the new approval, not ended by its 1m wait (which would list it
	// too): 30s is a hang guard far below the wait and far above a wake-up.
	t.Logf("long poll answered after %s", time.Since(start))
	if !strings.Contains(string(body), `"touch x"`) || time.Since(start) > 30*time.Second {
		t.Fatalf("long poll: %s after %s", body, time.Since(start))
	}

	// dont_ask turns the ask into a denial at once.
	id2 := d.createSession(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "dont_ask"})["id"].(string)
	_, evs := d.stream("/v1/sessions/"+id2+"/tool-calls", `{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"touch x"}}]}`)
	if m := messages(t, evs)["x"]; m.str("error_kind") != "denied" {
		t.Fatalf("dont_ask: %s", m.raw)
	}
	// explore denies anything that is not read-only; a deny rule denies in every mode.
	id3 := d.createSession(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "explore",
		"rules": map[string]any{"deny": []string{"execute_command(cat:*)"}}})["id"].(string)
	_, evs = d.stream("/v1/sessions/"+id3+"/tool-calls", `{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"touch y"}},{"id":"c","name":"execute_command","arguments":{"command":"cat /etc/hostname"}},{"id":"l","name":"execute_command","arguments":{"command":"ls"}}]}`)
	msgs := messages(t, evs)
	if msgs["w"].str("error_kind") != "denied" || msgs["c"].str("error_kind") != "denied" || msgs["l"].m["is_error"] != false {
		t.Fatalf("explore: %s / %s / %s", msgs["w"].raw, msgs["c"].raw, msgs["l"].raw)
	}
	if code, _, body := d.do("POST", "/v1/sessions", `{"rules":{"allow":["execute_command(("]}}`); code != 400 {
		t.Fatalf("bad session rule: %d %s", code, body)
	}
}

// restMessages returns the message events of the rest of a stream (read past its
// approval_required event), checking that it ends with done.
func restMessages(t *testing.T, evs []event) map[string]event {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].str("type") != "done" {
		t.Fatalf("stream does not end with done: %v", evs)
	}
	out := map[string]event{}
	for _, e := range evs {
		if e.str("type") == "message" {
			out[e.str("tool_call_id")] = e
		}
	}
	return out
}

// TestCallEventsReplayAndFollow: a client that lost its stream while the call waited
// for approval follows it again at /v1/tool-calls/{id}/events: the replay shows the
// start and the approval request, then the result arrives when the call is decided.
func TestCallEventsReplayAndFollow(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, _, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"e","name":"execute_command","arguments":{"command":"echo followed > out.txt; cat out.txt"}}]}`)
	stop() // the stream is gone; the approval stays pending
	code, _, body := d.do("GET", "/v1/approvals/"+apr["id"].(string), nil)
	if code != 200 {
		t.Fatal(code)
	}
	var a struct {
		CallID string `json:"call_id"`
	}
	_ = json.Unmarshal(body, &a)

	got := make(chan []event, 1)
	go func() {
		code, _, body := d.do("GET", "/v1/tool-calls/"+a.CallID+"/events", nil)
		if code != 200 {
			t.Errorf("events: %d %s", code, body)
		}
		got <- parseNDJSON(t, body)
	}()
	time.Sleep(300 * time.Millisecond)
	if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("decide: %d %s", code, body)
	}
	evs := <-got
	var types []string
	for _, e := range evs {
		types = append(types, e.str("type"))
	}
	joined := strings.Join(types, ",")
	if !strings.HasPrefix(joined, "tool_start,approval_required,") || !strings.HasSuffix(joined, "message,done") {
		t.Fatalf("events: %s", joined)
	}
	if m := evs[len(evs)-2]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "followed") {
		t.Fatalf("message: %s", m.raw)
	}
}

// TestCallEventsReplayDecidedCall: a call approved after its client left and then run
// to its end is replayed by /v1/tool-calls/{id}/events (and by a resumed batch) as its
// own stream had it: tool_start, its approval request, its output, its message. The
// approval request was left out once the call had left its wait, and the output so far
// came before it while the call ran.
func TestCallEventsReplayDecidedCall(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	batch := `{"calls":[{"id":"d","name":"execute_command","arguments":{"command":"echo decided > out.txt; cat out.txt"}}]}`
	apr, _, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", batch)
	stop() // the client left; the request stays pending
	if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("decide: %d %s", code, body)
	}
	var rec struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	for deadline := time.Now().Add(10 * time.Second); rec.Status != "succeeded"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the approved call did not finish: %+v", rec)
		}
		_, _, b := d.do("GET", "/v1/sessions/"+id+"/tool-calls/d", nil)
		_ = json.Unmarshal(b, &rec)
	}
	resumed := strings.Replace(batch, `{"calls"`, `{"resume":true,"calls"`, 1)
	for _, replay := range []struct{ what, method, path, body string }{
		{"events", "GET", "/v1/tool-calls/" + rec.ID + "/events", ""},
		{"resumed batch", "POST", "/v1/sessions/" + id + "/tool-calls", resumed},
	} {
		var body any
		if replay.body != "" {
			body = replay.body
		}
		code, _, out := d.do(replay.method, replay.path, body)
		if code != 200 {
			t.Fatalf("%s: %d %s", replay.what, code, out)
		}
		var types []string
		for _, e := range parseNDJSON(t, out) {
			types = append(types, e.str("type"))
			if e.str("type") == "approval_required" && e.m["approval"].(map[string]any)["id"] != apr["id"] {
				t.Fatalf("%s: another approval request: %s", replay.what, e.raw)
			}
		}
		joined := strings.Join(types, ",")
		if !strings.HasPrefix(joined, "tool_start,approval_required,tool_progress,") || !strings.HasSuffix(joined, ",message,done") ||
			strings.Count(joined, "approval_required") != 1 {
			t.Fatalf("%s: %s\n%s", replay.what, joined, out)
		}
	}
}

// TestApprovedCallWaitsForSessionLock: an approved call that nobody waits for any more
// (its stream went away) is run by the daemon, still as one of its session's calls: a
// tool that is not concurrency-safe waits for the session's running one to finish.
func TestApprovedCallWaitsForSessionLock(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = []string{"execute_command(sleep:*)"} }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	held := make(chan []event, 1)
	go func() {
		_, evs := d.stream(calls, `{"calls":[{"id":"holder","name":"execute_command","arguments":{"command":"sleep 2"}}]}`)
		held <- evs
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, b := d.do("GET", calls+"/holder", nil); strings.Contains(string(b), `"status":"running"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder never ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	apr, _, stop := streamUntilApproval(t, d, calls, `{"calls":[{"id":"asked","name":"execute_command","arguments":{"command":"echo ran > asked.txt"}}]}`)
	stop() // nobody waits for it now
	if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("decide: %d %s", code, body)
	}
	if m := messages(t, <-held)["holder"]; m.m["is_error"] != false {
		t.Fatalf("holder: %s", m.raw)
	}
	var rec struct {
		Status     string    `json:"status"`
		FinishedAt time.Time `json:"finished_at"`
	}
	for deadline = time.Now().Add(10 * time.Second); rec.Status != "succeeded"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the approved call did not finish: %+v", rec)
		}
		_, _, b := d.do("GET", calls+"/asked", nil)
		_ = json.Unmarshal(b, &rec)
	}
	var holder struct {
		FinishedAt time.Time `json:"finished_at"`
	}
	_, _, b := d.do("GET", calls+"/holder", nil)
	_ = json.Unmarshal(b, &holder)
	if rec.FinishedAt.Before(holder.FinishedAt) {
		t.Errorf("the approved call finished at %s, before the session's running call (%s): it did not wait for the lock", rec.FinishedAt, holder.FinishedAt)
	}
}

// TestApprovedCallRunsAfterRestart: a call approved while nobody waits for it, whose
// deciding daemon stopped before running it, runs exactly once after a restart.
func TestApprovedCallRunsAfterRestart(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(c *config.Config) { c.Permissions.Allow = nil }, func(t *testing.T, opts daemonOpts) {
		d := startDaemon(t, opts)
		sess := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})
		id, wd := sess["id"].(string), sess["workdir"].(string)
		apr, rest, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls",
			`{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"echo ran >> ran.txt"}}]}`)
		stop() // the agent went away
		<-rest
		// Decided, and the decider stopped before it ran the call: the decision is in
		// the store, and nothing else happened.
		as := d.app.Store.(store.ApprovalStore)
		if _, err := as.DecideApproval(t.Context(), apr["id"].(string), store.ApprovalDecision{Kind: store.DecisionApprove, Actor: "ada"}); err != nil {
			t.Fatal(err)
		}
		a, err := as.GetApproval(t.Context(), apr["id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		callID := a.CallID
		d.stop()

		d2 := startDaemon(t, opts)
		var rec string
		waitFor(t, 30*time.Second, "the approved call to run", func() bool {
			_, _, body := d2.do("GET", "/v1/tool-calls/"+callID, nil)
			rec = string(body)
			return strings.Contains(rec, `"status":"succeeded"`)
		})
		if n := lines(t, filepath.Join(wd, "ran.txt")); n != 1 {
			t.Fatalf("ran.txt has %d lines, want 1: %s", n, rec)
		}
	})
}

// TestNULInNamesAndDecisions: PostgreSQL keeps no NUL in text; a key name or tenant,
// or a decision's actor or reason, holding one is a 400 on every store (it was a 500
// on PostgreSQL), and the approval stays pending.
func TestNULInNamesAndDecisions(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{store: pgtest.URL(t), mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	for _, body := range []string{`{"name":"a\u0000b","tenant":"default","roles":["agent"]}`, `{"name":"ok","tenant":"a\u0000b","roles":["agent"]}`} {
		code, _, resp := d.do("POST", "/v1/keys", body)
		wantStatus(t, "create key "+body, code, 400, resp)
		validate(t, "Error", resp)
	}
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, _, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"echo ran >> ran.txt"}}]}`)
	defer stop()
	for _, body := range []string{`{"decision":"deny","actor":"a\u0000b"}`, `{"decision":"deny","reason":"no\u0000"}`} {
		code, _, resp := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", body)
		wantStatus(t, "decide "+body, code, 400, resp)
		validate(t, "Error", resp)
	}
	if code, _, resp := d.do("GET", "/v1/approvals/"+apr["id"].(string), nil); code != 200 || !strings.Contains(string(resp), `"status":"pending"`) {
		t.Fatalf("approval after refused decisions: %d %s", code, resp)
	}
}

// TestApprovedCallOutlivesItsClient: a call approved while its client waited runs to
// the end even when that client goes away after the approval (here while the call
// waits for the session's lock): a person approved it, and nobody else will run it.
func TestApprovedCallOutlivesItsClient(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = []string{"execute_command(sleep:*)"} }})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})
	id, wd := sess["id"].(string), sess["workdir"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	held := make(chan []event, 1)
	go func() {
		_, evs := d.stream(calls, `{"calls":[{"id":"holder","name":"execute_command","arguments":{"command":"sleep 2"}}]}`)
		held <- evs
	}()
	waitFor(t, 30*time.Second, "the holder runs", func() bool {
		_, _, b := d.do("GET", calls+"/holder", nil)
		return strings.Contains(string(b), `"status":"running"`)
	})
	apr, _, stop := streamUntilApproval(t, d, calls, `{"calls":[{"id":"asked","name":"execute_command","arguments":{"command":"echo ran > asked.txt"}}]}`)
	if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("decide: %d %s", code, body)
	}
	// The waiting stream claims the approved call, which then waits for the lock.
	waitFor(t, 30*time.Second, "the approved call is claimed", func() bool {
		_, _, b := d.do("GET", calls+"/asked", nil)
		return strings.Contains(string(b), `"status":"running"`)
	})
	stop() // its client goes away
	<-held
	var rec string
	waitFor(t, 30*time.Second, "the approved call finishes", func() bool {
		_, _, b := d.do("GET", calls+"/asked", nil)
		rec = string(b)
		return !strings.Contains(rec, `"status":"running"`)
	})
	if !strings.Contains(rec, `"status":"succeeded"`) || lines(t, filepath.Join(wd, "asked.txt")) != 1 {
		t.Fatalf("the approved call after its client left: %s", rec)
	}
}

// TestReadingTheDataDirAsks: in local mode a command runs with the daemon's rights, so a
// "read-only" command reading the daemon's data dir (its admin key, its database,
// other sessions' workspaces) is not run without a person's approval, whatever the
// mode; reading inside the session's own workspace still runs at once.
func TestReadingTheDataDirAsks(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	for _, mode := range []string{"default", "bypass"} {
		sess := d.createSession(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": mode})
		id, wd := sess["id"].(string), sess["workdir"].(string)
		calls := "/v1/sessions/" + id + "/tool-calls"
		for _, cmd := range []string{"cat ../../admin.key", "cat " + filepath.Join(d.dataDir, "toolserverd.db"), "ls ..", "cd ../.. && cat admin.key"} {
			apr, _, stop := streamUntilApproval(t, d, calls, `{"calls":[{"id":"r","name":"execute_command","arguments":{"command":`+strconv.Quote(cmd)+`}}]}`)
			stop()
			if !strings.Contains(apr["reason"].(string), "data") {
				t.Errorf("%s mode, %q: asked, but the reason does not say why: %v", mode, cmd, apr["reason"])
			}
		}
		if err := os.WriteFile(filepath.Join(wd, "mine.txt"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, evs := d.stream(calls, `{"calls":[{"id":"own","name":"execute_command","arguments":{"command":"cat mine.txt ./mine.txt `+filepath.Join(wd, "mine.txt")+`"}}]}`)
		if m := messages(t, evs)["own"]; m.m["is_error"] != false {
			t.Errorf("%s mode: reading the session's own files: %s", mode, m.raw)
		}
	}
}

// TestInvalidArgumentsAreNotSentForApproval: a call that would ask a person but whose
// arguments the tool refuses is answered invalid_args at once (the model fixes it on
// its next turn); no approval request is made for a call that cannot run.
func TestInvalidArgumentsAreNotSentForApproval(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command", "write_file"}})["id"].(string)
	done := make(chan []event, 1)
	go func() {
		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format=openai", `{"calls":[
			{"id":"c1","type":"function","function":{"name":"execute_command","arguments":"{\"cmd\":\"rm -rf build\",\"timeout_ms\":\"x\"}"}},
			{"id":"c2","type":"function","function":{"name":"execute_command","arguments":""}},
			{"id":"c3","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"a.txt\"}"}}]}`)
		done <- evs
	}()
	var evs []event
	select {
	case evs = <-done:
	case <-time.After(10 * time.Second):
		_, _, body := d.do("GET", "/v1/approvals?status=pending", nil)
		t.Fatalf("calls with invalid arguments wait (pending approvals: %s)", body)
	}
	for _, e := range evs {
		if e.str("type") == "approval_required" {
			t.Fatalf("approval requested for a call with invalid arguments: %s", e.raw)
		}
	}
	msgs := messages(t, evs)
	for id, want := range map[string]string{"c1": "missing property 'command'", "c2": "missing property 'command'", "c3": "missing property 'content'"} {
		m := msgs[id]
		if m.str("error_kind") != "invalid_args" || !strings.Contains(string(m.raw), want) {
			t.Errorf("%s: want invalid_args mentioning %q, got %s", id, want, m.raw)
		}
	}
	if _, _, body := d.do("GET", "/v1/approvals?status=pending", nil); strings.Contains(string(body), "apr_") {
		t.Fatalf("pending approvals were created: %s", body)
	}
}

// TestShutdownDoesNotWaitForApprovals: a redeploy while a call waits for a person
// (scenario 4) stops at once instead of holding the drain for shutdown_timeout: the
// waiting stream is told the request stays pending, and after the restart the
// approval runs the call exactly once.
func TestShutdownDoesNotWaitForApprovals(t *testing.T) {
	t.Parallel()
	opts := daemonOpts{dataDir: t.TempDir(), mutate: func(c *config.Config) {
		c.Permissions.Allow = nil
		c.ShutdownTimeout = time.Minute
	}}
	d := startDaemon(t, opts)
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})
	id, wd := sess["id"].(string), sess["workdir"].(string)
	apr, rest, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"echo ran >> ran.txt"}}]}`)
	defer stop()
	start := time.Now()
	d.stop()
	// Not held for shutdown_timeout: a hang guard at half of it, logged; the
	// waiting stream's message below says what ended the call.
	t.Logf("shutdown took %s with a call waiting for approval", time.Since(start))
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("shutdown took %v with a call waiting for approval (shutdown_timeout 1m)", took)
	}
	m := restMessages(t, <-rest)["w"]
	if m.str("error_kind") != "cancelled" || !strings.Contains(string(m.raw), "shut down") || !strings.Contains(string(m.raw), "stays pending") {
		t.Fatalf("the waiting stream's message: %s", m.raw)
	}

	d2 := startDaemon(t, opts)
	if code, _, body := d2.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("decide after restart: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "the approved call to run", func() bool {
		return lines(t, filepath.Join(wd, "ran.txt")) == 1
	})
	time.Sleep(200 * time.Millisecond)
	if n := lines(t, filepath.Join(wd, "ran.txt")); n != 1 {
		t.Fatalf("ran.txt has %d lines, want 1", n)
	}
}

// TestApproveForSessionIsNarrow: approving "for session" a destructive command allows
// that command again, not every command of its name (scenario 4's rm -rf build/ && git
// push --force must not allow a later rm of anything else, or any force-push).
func TestApproveForSessionIsNarrow(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	apr, rest, stop := streamUntilApproval(t, d, calls, `{"calls":[{"id":"rm","name":"execute_command","arguments":{"command":"rm -rf build/ && git push --force"}}]}`)
	defer stop()
	if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve_for_session"}`); code != 200 {
		t.Fatalf("decide: %d %s", code, body)
	}
	<-rest
	_, _, body := d.do("GET", "/v1/sessions/"+id, nil)
	if !strings.Contains(string(body), `execute_command(rm -rf build/)`) || strings.Contains(string(body), ":*") {
		t.Fatalf("session rules after approve_for_session: %s", body)
	}
	// Another rm still asks (streamUntilApproval fails the test if it runs instead).
	_, _, stop2 := streamUntilApproval(t, d, calls, `{"calls":[{"id":"rm2","name":"execute_command","arguments":{"command":"rm -rf src/"}}]}`)
	stop2()
}

// TestRuleOnlyWithApproveWithRule: a rule sent with another decision is refused, not
// dropped: the record would name a rule that was never added to the session.
func TestRuleOnlyWithApproveWithRule(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, rest, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"t","name":"execute_command","arguments":{"command":"touch a"}}]}`)
	defer stop()
	decision := "/v1/approvals/" + apr["id"].(string) + "/decision"
	for _, kind := range []string{"approve", "approve_for_session", "deny"} {
		code, _, body := d.do("POST", decision, `{"decision":"`+kind+`","rule":"execute_command(touch:*)"}`)
		if code != 400 || !strings.Contains(string(body), "approve_with_rule") {
			t.Fatalf("%s with a rule: %d %s", kind, code, body)
		}
		validate(t, "Error", body)
	}
	code, _, body := d.do("POST", decision, `{"decision":"approve","rule":""}`)
	if code != 200 || strings.Contains(string(body), `"rule"`) {
		t.Fatalf("approve: %d %s", code, body)
	}
	<-rest
	if _, _, body := d.do("GET", "/v1/sessions/"+id, nil); strings.Contains(string(body), "touch") {
		t.Fatalf("a rule was added: %s", body)
	}
}

// TestRefusedWritesAskNobody: in default mode writes ask for approval, but a write
// its tool would refuse anyway (a file the session has not read, an edit of a
// missing file, an edit whose old_string is not found or not unique) comes back at
// once as the tool's refusal, with no approval request for a person to decide in vain.
// Once the file is read, the write asks as usual.
func TestRefusedWritesAskNobody(t *testing.T) {
	t.Parallel()
	// A short TTL: a request made in vain expires (denied) instead of holding the
	// stream, so the test sees it rather than hanging.
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow, c.Permissions.ApprovalTTL = nil, 2*time.Second }})
	sess := d.createSession(map[string]any{"available_tools": []string{"read_file", "write_file", "edit_file", "multi_edit", "json_write"}})
	id, wd := sess["id"].(string), sess["workdir"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	for _, f := range []string{"notes.txt", "cfg.json"} {
		if err := os.WriteFile(filepath.Join(wd, f), []byte(`{"a":1}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, evs := d.stream(calls, `{"strategy":"sequential","calls":[
		{"id":"w","name":"write_file","arguments":{"path":"notes.txt","content":"x"}},
		{"id":"e","name":"edit_file","arguments":{"path":"missing.txt","old_string":"a","new_string":"b"}},
		{"id":"j","name":"json_write","arguments":{"path":"cfg.json","pointer":"/a","value":2}}]}`)
	for _, e := range evs {
		if e.str("type") == "approval_required" {
			t.Fatalf("a person was asked to approve a call the tool refuses: %s", e.raw)
		}
	}
	msgs := messages(t, evs)
	for id, want := range map[string]string{"w": "has not been read", "e": "does not exist", "j": "has not been read"} {
		m := msgs[id]
		if m.m["is_error"] != true || !strings.Contains(string(m.raw), want) {
			t.Errorf("%s: %s, want an error saying %q", id, m.raw, want)
		}
	}
	if code, _, body := d.do("GET", "/v1/approvals?status=pending", nil); code != 200 || strings.Contains(string(body), `"apr_`) {
		t.Errorf("pending approvals: %d %s, want none", code, body)
	}
	b, err := os.ReadFile(filepath.Join(wd, "notes.txt"))
	if err != nil || string(b) != `{"a":1}`+"\n" {
		t.Errorf("notes.txt = %q, %v; want it unchanged", b, err)
	}

	// Read, then the write asks a person as every write does in default mode.
	_, evs = d.stream(calls, `{"calls":[{"id":"r","name":"read_file","arguments":{"path":"notes.txt"}}]}`)
	if m := messages(t, evs)["r"]; m.m["is_error"] != false {
		t.Fatalf("read_file: %s", m.raw)
	}
	// Read, but an edit whose old_string matches twice, or not at all, cannot apply,
	// nor can a multi_edit none of whose edits applies (or, strict, one fails):
	// refused at once too.
	_, evs = d.stream(calls, `{"calls":[
		{"id":"e2","name":"edit_file","arguments":{"path":"notes.txt","old_string":"\"","new_string":"'"}},
		{"id":"e0","name":"edit_file","arguments":{"path":"notes.txt","old_string":"nowhere","new_string":"x"}},
		{"id":"m0","name":"multi_edit","arguments":{"path":"notes.txt","edits":[{"old_string":"nowhere","new_string":"x"}]}},
		{"id":"ms","name":"multi_edit","arguments":{"path":"notes.txt","mode":"strict","edits":[{"old_string":"a","new_string":"b"},{"old_string":"nowhere","new_string":"x"}]}}]}`)
	for _, e := range evs {
		if e.str("type") == "approval_required" {
			t.Fatalf("a person was asked to approve an edit that cannot apply: %s", e.raw)
		}
	}
	msgs = messages(t, evs)
	for id, want := range map[string]string{"e2": "old_string matches 2 times", "e0": "old_string was not found", "m0": "nothing was written", "ms": "nothing was written"} {
		if m := msgs[id]; m.m["is_error"] != true || !strings.Contains(string(m.raw), want) {
			t.Errorf("%s: %s, want an error saying %q", id, m.raw, want)
		}
	}
	apr, _, stop := streamUntilApproval(t, d, calls, `{"calls":[{"id":"w2","name":"write_file","arguments":{"path":"notes.txt","content":"x"}}]}`)
	defer stop()
	if apr["id"] == nil {
		t.Fatalf("approval_required without an id: %v", apr)
	}
}

// TestUnsafeCallWaitsForEarlierApproval: in one request, a command that needs no
// approval but is listed after one waiting for a person runs only once that one is
// decided, and after it; a denial lets it go on.
func TestUnsafeCallWaitsForEarlierApproval(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = []string{"execute_command(touch second)"} }})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})
	id, wd := sess["id"].(string), sess["workdir"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	first, second := filepath.Join(wd, "first"), filepath.Join(wd, "second")
	for _, decision := range []string{"approve", "deny"} {
		for _, f := range []string{first, second} {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
		apr, rest, stop := streamUntilApproval(t, d, calls, `{"calls":[
			{"id":"first","name":"execute_command","arguments":{"command":"touch first"}},
			{"id":"second","name":"execute_command","arguments":{"command":"touch second"}}]}`)
		time.Sleep(300 * time.Millisecond) // time for the second call to run, were it not waiting
		if _, err := os.Stat(second); err == nil {
			stop()
			t.Fatalf("%s: the second call ran while the first waited for approval", decision)
		}
		if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"`+decision+`"}`); code != 200 {
			stop()
			t.Fatalf("%s: %d %s", decision, code, body)
		}
		msgs := restMessages(t, <-rest)
		stop()
		if msgs["second"].m["is_error"] != false {
			t.Fatalf("%s: second call: %s", decision, msgs["second"].raw)
		}
		s2, err := os.Stat(second)
		if err != nil {
			t.Fatalf("%s: second call left no file: %v", decision, err)
		}
		s1, err := os.Stat(first)
		switch {
		case decision == "deny" && err == nil:
			t.Errorf("deny: the denied call ran")
		case decision == "approve" && err != nil:
			t.Errorf("approve: the approved call left no file: %v", err)
		case decision == "approve" && s1.ModTime().After(s2.ModTime()):
			t.Errorf("approve: the second call ran before the first (%s, %s)", s1.ModTime(), s2.ModTime())
		}
	}
}

// TestCallLeftWaitingIsCountedOnce: a call whose client leaves while it waits for
// approval is not over; approved later, it runs, and the metrics count it once, as
// succeeded, not first as cancelled.
func TestCallLeftWaitingIsCountedOnce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	apr, rest, stop := streamUntilApproval(t, d, calls, `{"calls":[{"id":"left","name":"execute_command","arguments":{"command":"echo hi > left.txt"}}]}`)
	stop()
	<-rest
	metrics := func() string {
		_, _, b := d.do("GET", "/metrics", nil)
		return string(b)
	}
	// The request is counted once its handler has returned: the executor is done with
	// the call it left waiting.
	waitFor(t, 30*time.Second, "the left request's handler returns", func() bool {
		return strings.Contains(metrics(), `toolserverd_http_requests_total{code="200",method="POST",route="/v1/sessions/{sessionID}/tool-calls"}`)
	})
	if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("decide: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "the approved call succeeds", func() bool {
		_, _, b := d.do("GET", calls+"/left", nil)
		return strings.Contains(string(b), `"status":"succeeded"`)
	})
	m := metrics()
	if strings.Contains(m, `toolserverd_tool_calls_total{outcome="cancelled",tool="execute_command"}`) ||
		!strings.Contains(m, `toolserverd_tool_calls_total{outcome="ok",tool="execute_command"} 1`) {
		t.Fatalf("tool call metrics after a call left waiting then approved:\n%s", grepLines(m, "toolserverd_tool_calls_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestExpiredRequestLeavesPendingAtOnce: an approval request whose time has passed is
// listed as expired, not pending, from that moment, not from the next sweep (every
// 5 s): an approver polling pending requests is not shown one it can no longer decide.
func TestExpiredRequestLeavesPendingAtOnce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow, c.Permissions.ApprovalTTL = nil, time.Second }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, _, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"touch x"}}]}`)
	// The client leaves: the request stays pending, and only the sweep records its
	// expiry (a waiting stream would record it itself).
	stop()
	aid := apr["id"].(string)
	expires, err := time.Parse(time.RFC3339Nano, apr["expires_at"].(string))
	if err != nil {
		t.Fatalf("expires_at %v: %v", apr["expires_at"], err)
	}
	time.Sleep(time.Until(expires) + 20*time.Millisecond)
	if code, _, body := d.do("GET", "/v1/approvals?status=pending", nil); code != 200 || strings.Contains(string(body), aid) {
		t.Errorf("pending after expiry: %d %s, want it left out", code, body)
	}
	if code, _, body := d.do("GET", "/v1/approvals?status=expired", nil); code != 200 || !strings.Contains(string(body), aid) || !strings.Contains(string(body), `"status":"expired"`) {
		t.Errorf("expired after expiry: %d %s, want it listed as expired", code, body)
	}
	code, _, body := d.do("GET", "/v1/approvals/"+aid, nil)
	if code != 200 || !strings.Contains(string(body), `"status":"expired"`) {
		t.Errorf("the request after expiry: %d %s, want status expired", code, body)
	}
	validate(t, "Approval", body)
}

// TestApproveForSessionApprovesTheBatch: two calls of a parallel batch ask for the
// same thing; approving one "for the session" approves the other by the rule it
// added, in the approver's name: each runs once, with no second decision.
func TestApproveForSessionApprovesTheBatch(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})
	id, wd := sess["id"].(string), sess["workdir"].(string)
	_, rest, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[
		{"id":"a","name":"execute_command","arguments":{"command":"touch a.txt"}},
		{"id":"b","name":"execute_command","arguments":{"command":"touch b.txt"}},
		{"id":"c","name":"execute_command","arguments":{"command":"echo c >> c.txt"}}]}`)
	defer stop()
	// Wait until all three ask; approve one of the touches for the session.
	var apr map[string]any
	waitFor(t, 30*time.Second, "three pending approvals", func() bool {
		_, _, body := d.do("GET", "/v1/approvals?status=pending&session_id="+id, nil)
		var l struct{ Approvals []map[string]any }
		_ = json.Unmarshal(body, &l)
		for _, a := range l.Approvals {
			if strings.Contains(fmt.Sprint(a["arguments"]), "touch") {
				apr = a
			}
		}
		return len(l.Approvals) == 3
	})
	if s := apr["suggestions"].([]any); len(s) != 1 || s[0] != "execute_command(touch:*)" {
		t.Fatalf("suggestions %v, want execute_command(touch:*)", s)
	}
	if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve_for_session","actor":"ada"}`); code != 200 {
		t.Fatalf("decide: %d %s", code, body)
	}
	// The other touch is approved by the rule; the echo still waits for a person.
	var other map[string]any
	waitFor(t, 30*time.Second, "the other touch approved by the rule", func() bool {
		_, _, body := d.do("GET", "/v1/approvals?status=approved&session_id="+id, nil)
		var l struct{ Approvals []map[string]any }
		_ = json.Unmarshal(body, &l)
		for _, a := range l.Approvals {
			if a["id"] != apr["id"] {
				other = a
			}
		}
		return other != nil
	})
	dec, _ := other["decision"].(map[string]any)
	if dec["actor"] == nil || !strings.Contains(dec["actor"].(string), "ada") || !strings.Contains(dec["reason"].(string), "execute_command(touch:*)") {
		t.Errorf("the rule's approval: %v, want ada's name and the rule", other)
	}
	_, _, body := d.do("GET", "/v1/approvals?status=pending&session_id="+id, nil)
	if !strings.Contains(string(body), "c.txt") || strings.Contains(string(body), "touch") {
		t.Fatalf("still pending: %s, want only the echo", body)
	}
	var l struct{ Approvals []map[string]any }
	_ = json.Unmarshal(body, &l)
	if code, _, body := d.do("POST", "/v1/approvals/"+l.Approvals[0]["id"].(string)+"/decision", `{"decision":"deny","actor":"ada"}`); code != 200 {
		t.Fatalf("deny: %d %s", code, body)
	}
	msgs := restMessages(t, <-rest)
	if msgs["a"].m["is_error"] != false || msgs["b"].m["is_error"] != false || msgs["c"].str("error_kind") != "denied" {
		t.Fatalf("results: %s / %s / %s", msgs["a"].raw, msgs["b"].raw, msgs["c"].raw)
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if _, err := os.Stat(filepath.Join(wd, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
