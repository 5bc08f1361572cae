package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// record returns a session's call record by tool_call_id, waiting until it exists.
func record(t *testing.T, d *daemon, sessionID, toolCallID string) map[string]any {
	t.Helper()
	var rec map[string]any
	waitFor(t, 30*time.Second, "the record of "+toolCallID, func() bool {
		code, _, body := d.do("GET", "/v1/sessions/"+sessionID+"/tool-calls/"+toolCallID, nil)
		if code != http.StatusOK {
			return false
		}
		rec = nil
		if err := json.Unmarshal(body, &rec); err != nil {
			t.Fatalf("record of %s: %v: %s", toolCallID, err, body)
		}
		return true
	})
	return rec
}

// checkCancelledBeforeRun checks that a call cancelled before it started says so in its
// message and in its record, which shows it never ran.
func checkCancelledBeforeRun(t *testing.T, d *daemon, sessionID string, m event) {
	t.Helper()
	if m.m["is_error"] != true || m.str("error_kind") != "cancelled" || !strings.Contains(string(m.raw), "cancelled by request before it ran") {
		t.Fatalf("message of the cancelled call: %s", m.raw)
	}
	rec := record(t, d, sessionID, m.str("tool_call_id"))
	if rec["status"] != "failed" || rec["error_kind"] != "cancelled" || rec["started_at"] != nil ||
		!strings.Contains(jsonOf(rec["result"]), "cancelled by request before it ran") {
		t.Fatalf("record of the cancelled call: %v", rec)
	}
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestCancelCallNotYetStarted: a call later in a sequential or batched batch can be
// cancelled while an earlier one runs; it then never runs.
func TestCancelCallNotYetStarted(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, body string }{
		{"sequential", `{"strategy":"sequential","calls":[{"id":"first","name":"block"},{"id":"later","name":"block"}]}`},
		{"batched", `{"strategy":"batched","batch_size":2,"calls":[{"id":"first","name":"block"},{"id":"other","name":"block"},{"id":"later","name":"block"}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t, daemonOpts{})
			id := d.createSession(map[string]any{})["id"].(string)
			out := make(chan []event, 1)
			go func() {
				_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", tt.body)
				out <- evs
			}()
			first := <-d.tools.blockStarts
			later := record(t, d, id, "later")
			if later["status"] != "pending" || later["started_at"] != nil {
				t.Fatalf("record of the call waiting for its turn: %v", later)
			}
			code, _, body := d.do("POST", "/v1/tool-calls/"+later["id"].(string)+"/cancel", nil)
			if code != http.StatusAccepted {
				t.Fatalf("cancel of the call waiting for its turn: %d %s", code, body)
			}
			close(d.tools.release) // the earlier calls finish; the cancelled one must not start
			msgs := messages(t, <-out)
			if msgs["first"].m["is_error"] != false {
				t.Fatalf("the running call was affected: %s", msgs["first"].raw)
			}
			checkCancelledBeforeRun(t, d, id, msgs["later"])
			close(d.tools.blockStarts)
			for started := range d.tools.blockStarts {
				if started == later["id"] {
					t.Fatalf("the cancelled call ran (first was %s)", first)
				}
			}
			code, _, body = d.do("POST", "/v1/tool-calls/"+later["id"].(string)+"/cancel", nil)
			if code != http.StatusConflict {
				t.Fatalf("cancel of the finished call: %d %s", code, body)
			}
		})
	}
}

// TestCancelCallWaitingForSessionLock: a call of a tool that is not concurrency-safe,
// queued behind the session's serial lock, is recorded pending (not running) while it
// waits, and can be cancelled there; it then never runs.
func TestCancelCallWaitingForSessionLock(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"

	holder := make(chan []event, 1)
	go func() {
		_, evs := d.stream(calls, `{"calls":[{"id":"holder","name":"sleep_unsafe","arguments":{"ms":60000}}]}`)
		holder <- evs
	}()
	waitFor(t, 30*time.Second, "the holder to run", func() bool { return d.tools.unsafeNow.Load() == 1 })
	if rec := record(t, d, id, "holder"); rec["status"] != "running" || rec["started_at"] == nil {
		t.Fatalf("record of the call holding the lock: %v", rec)
	}

	out := make(chan []event, 1)
	go func() {
		_, evs := d.stream(calls, `{"calls":[{"id":"queued","name":"sleep_unsafe","arguments":{"ms":1}},{"id":"safe","name":"echo","arguments":{"text":"ok"}}]}`)
		out <- evs
	}()
	queued := record(t, d, id, "queued")
	// Give it time to reach the lock: a record that says running would show by now.
	time.Sleep(200 * time.Millisecond)
	queued = record(t, d, id, "queued")
	if queued["status"] != "pending" || queued["started_at"] != nil {
		t.Fatalf("record of the call waiting for the session's lock: %v", queued)
	}
	code, _, body := d.do("POST", "/v1/tool-calls/"+queued["id"].(string)+"/cancel", nil)
	if code != http.StatusAccepted {
		t.Fatalf("cancel of the call waiting for the lock: %d %s", code, body)
	}
	// The batch ends while the holder still holds the lock: the cancelled call did not
	// wait for it, and could not have run.
	msgs := messages(t, <-out)
	if msgs["safe"].m["is_error"] != false {
		t.Fatalf("the other call of the batch: %s", msgs["safe"].raw)
	}
	checkCancelledBeforeRun(t, d, id, msgs["queued"])
	if n := d.tools.unsafeNow.Load(); n != 1 {
		t.Fatalf("%d unsafe calls running, want the holder only", n)
	}

	rec := record(t, d, id, "holder")
	if code, _, body := d.do("POST", "/v1/tool-calls/"+rec["id"].(string)+"/cancel", nil); code != http.StatusAccepted {
		t.Fatalf("cancel of the running holder: %d %s", code, body)
	}
	if m := messages(t, <-holder)["holder"]; m.str("error_kind") != "cancelled" || strings.Contains(string(m.raw), "before it ran") {
		t.Fatalf("message of the cancelled running call: %s", m.raw)
	}
	if got := d.tools.unsafeMax.Load(); got != 1 {
		t.Fatalf("unsafe calls overlapped (peak %d)", got)
	}
}

// TestCancelCallWaitingForApproval: cancelling a call that waits for a decision ends
// it as cancelled and withdraws the request, so a later approval cannot run it.
func TestCancelCallWaitingForApproval(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})
	id, wd := sess["id"].(string), sess["workdir"].(string)
	apr, rest, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"echo ran >> ran.txt"}}]}`)
	defer stop()
	callID := record(t, d, id, "w")["id"].(string)
	code, _, body := d.do("POST", "/v1/tool-calls/"+callID+"/cancel", nil)
	if code != http.StatusAccepted {
		t.Fatalf("cancel of the call waiting for approval: %d %s", code, body)
	}
	m := restMessages(t, <-rest)["w"]
	checkCancelledBeforeRun(t, d, id, m)

	// The request is withdrawn: an approver can no longer approve it, and nothing runs.
	code, _, body = d.do("GET", "/v1/approvals/"+apr["id"].(string), nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"status":"denied"`) || !strings.Contains(string(body), "cancelled by request") {
		t.Fatalf("approval after the cancel: %d %s", code, body)
	}
	code, _, body = d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve","actor":"ada"}`)
	if code != http.StatusConflict {
		t.Fatalf("approval of the cancelled call: %d %s", code, body)
	}
	time.Sleep(time.Second) // past the decider's grace before it runs an approved call itself
	if n := lines(t, filepath.Join(wd, "ran.txt")); n != 0 {
		t.Fatalf("the cancelled call ran (%d lines)", n)
	}
	checkCancelledBeforeRun(t, d, id, m)
}

// TestCancelCallLeftWaiting: a call whose client went away while it waited for a
// decision or an answer stays waiting (someone may still want it run); cancelling it
// then ends it as cancelled, and a decision or answer given afterwards cannot run it.
func TestCancelCallLeftWaiting(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command", "ask_user"}})
	id, wd := sess["id"].(string), sess["workdir"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"

	t.Run("approval", func(t *testing.T) {
		ev, rest, stop := streamUntilEvent(t, d, calls, `{"calls":[{"id":"left","name":"execute_command","arguments":{"command":"touch left.txt"}}]}`, "approval_required")
		stop()
		<-rest
		// Cancelled once its handler has returned: nothing in the process holds it.
		handlerReturned(t, d, 1)
		callID, apr := ev["call_id"].(string), ev["approval"].(map[string]any)
		if code, _, body := d.do("POST", "/v1/tool-calls/"+callID+"/cancel", nil); code != http.StatusAccepted {
			t.Fatalf("cancel of a call left waiting for approval: %d %s", code, body)
		}
		rec := record(t, d, id, "left")
		if rec["status"] != "failed" || rec["error_kind"] != "cancelled" || rec["started_at"] != nil ||
			!strings.Contains(jsonOf(rec["result"]), "cancelled by request before it ran") {
			t.Fatalf("record of the cancelled call: %v", rec)
		}
		code, _, body := d.do("GET", "/v1/approvals/"+apr["id"].(string), nil)
		if code != 200 || !strings.Contains(string(body), `"status":"denied"`) {
			t.Fatalf("the request after the cancel: %d %s, want denied", code, body)
		}
		if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != http.StatusConflict {
			t.Fatalf("approving a cancelled call: %d %s, want 409", code, body)
		}
		if code, _, body := d.do("POST", "/v1/tool-calls/"+callID+"/cancel", nil); code != http.StatusConflict || !strings.Contains(string(body), "already finished") {
			t.Fatalf("second cancel: %d %s, want 409 already finished", code, body)
		}
		time.Sleep(200 * time.Millisecond) // an approval, had one run it, would have
		if _, err := os.Stat(filepath.Join(wd, "left.txt")); err == nil {
			t.Fatal("the cancelled call ran")
		}
	})

	t.Run("answer", func(t *testing.T) {
		ev, rest, stop := streamUntilEvent(t, d, calls, `{"calls":[{"id":"asked","name":"ask_user","arguments":{"question":"Which colour?"}}]}`, "input_required")
		stop()
		<-rest
		handlerReturned(t, d, 2)
		callID := ev["call_id"].(string)
		if code, _, body := d.do("POST", "/v1/tool-calls/"+callID+"/cancel", nil); code != http.StatusAccepted {
			t.Fatalf("cancel of a call left waiting for an answer: %d %s", code, body)
		}
		rec := record(t, d, id, "asked")
		if rec["status"] != "failed" || rec["error_kind"] != "cancelled" {
			t.Fatalf("record of the cancelled call: %v", rec)
		}
		if code, _, body := d.do("POST", "/v1/tool-calls/"+callID+"/result", `{"content":"red"}`); code != http.StatusConflict {
			t.Fatalf("answering a cancelled call: %d %s, want 409", code, body)
		}
	})
}
