package server_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// callsCounted is the value of toolserverd_tool_calls_total for tool and outcome on d's
// /metrics; 0 when the series is not there.
func callsCounted(t *testing.T, d *daemon, tool, outcome string) float64 {
	t.Helper()
	_, _, b := d.do("GET", "/metrics", nil)
	prefix := `toolserverd_tool_calls_total{outcome="` + outcome + `",tool="` + tool + `"} `
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", l, err)
			}
			return f
		}
	}
	return 0
}

// handlerReturned waits until d has counted n finished requests of a session's
// tool-calls route: the executor is done with the calls of the stream that left.
func handlerReturned(t *testing.T, d *daemon, n int) {
	t.Helper()
	want := `toolserverd_http_requests_total{code="200",method="POST",route="/v1/sessions/{sessionID}/tool-calls"} ` + strconv.Itoa(n)
	waitFor(t, 30*time.Second, "the tool-calls handler returns", func() bool {
		_, _, b := d.do("GET", "/metrics", nil)
		return strings.Contains(string(b), want)
	})
}

// TestDeniedOrExpiredCallCountedOnce: a call whose approval is denied or expires is
// counted once in toolserverd_tool_calls_total, as denied, whether its stream still
// waits (the executor answers it) or went away before (the store finishes it, later).
func TestDeniedOrExpiredCallCountedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		leave, expire bool
	}{
		{"attached/deny", false, false},
		{"attached/expire", false, true},
		{"left/deny", true, false},
		{"left/expire", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
				c.Permissions.Allow = nil
				if tc.expire {
					c.Permissions.ApprovalTTL = time.Second
				}
			}})
			id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
			apr, rest, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"touch x"}}]}`)
			defer stop()
			if tc.leave {
				stop()
				<-rest
				handlerReturned(t, d, 1)
			}
			if !tc.expire {
				if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"deny"}`); code != 200 {
					t.Fatalf("deny: %d %s", code, body)
				}
			}
			if !tc.leave {
				if m := restMessages(t, <-rest)["x"]; m.m["is_error"] != true {
					t.Fatalf("the stream's result: %s", m.raw)
				}
				handlerReturned(t, d, 1)
			}
			// A call left waiting for a sweep to expire it takes up to one sweep (5 s).
			waitFor(t, 30*time.Second, "the call is counted", func() bool {
				return callsCounted(t, d, "execute_command", "denied") > 0
			})
			if n := callsCounted(t, d, "execute_command", "denied"); n != 1 {
				t.Errorf("toolserverd_tool_calls_total{denied,execute_command} = %v, want 1", n)
			}
		})
	}
}

// TestDeniedCallCountedOnceAcrossReplicas: two replicas on one PostgreSQL; a call asked
// on A is denied on B. Counted on the two replicas together, it is counted once,
// whether A's stream still waits for it or went away before the denial.
func TestDeniedCallCountedOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Permissions.Allow = nil
		c.Sessions.WorkdirRoots = []string{shared}
	})
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": shared})["id"].(string)
	counted := func() float64 {
		return callsCounted(t, a, "execute_command", "denied") + callsCounted(t, b, "execute_command", "denied")
	}
	for i, leave := range []bool{false, true} {
		apr, rest, stop := streamUntilApproval(t, a, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"touch x"}}]}`)
		if leave {
			stop()
			<-rest
			handlerReturned(t, a, i+1)
		}
		if code, _, body := b.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"deny"}`); code != 200 {
			stop()
			t.Fatalf("deny on B: %d %s", code, body)
		}
		if !leave {
			if m := restMessages(t, <-rest)["x"]; m.m["is_error"] != true {
				t.Fatalf("the stream's result on A: %s", m.raw)
			}
			handlerReturned(t, a, i+1)
		}
		stop()
		want := float64(i + 1)
		waitFor(t, 30*time.Second, "the call is counted", func() bool { return counted() >= want })
		if n := counted(); n != want {
			t.Errorf("leave=%v: denied calls counted on A and B = %v, want %v", leave, n, want)
		}
	}
}

// TestAnsweredCallCountedOnce: an external tool's call (ask_user) is counted once when
// its answer is posted, whether its stream still waits or went away before.
func TestAnsweredCallCountedOnce(t *testing.T) {
	t.Parallel()
	for _, leave := range []bool{false, true} {
		t.Run(map[bool]string{false: "attached", true: "left"}[leave], func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t, daemonOpts{})
			id := d.createSession(map[string]any{"available_tools": []string{"ask_user"}})["id"].(string)
			ev, rest, stop := streamUntilEvent(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"q","name":"ask_user","arguments":{"question":"Which colour?"}}]}`, "input_required")
			defer stop()
			if leave {
				stop()
				<-rest
				handlerReturned(t, d, 1)
			}
			if code, _, body := d.do("POST", "/v1/tool-calls/"+ev["call_id"].(string)+"/result", `{"content":"blue"}`); code != 200 {
				t.Fatalf("answer: %d %s", code, body)
			}
			if !leave {
				if m := restMessages(t, <-rest)["q"]; m.m["is_error"] != false {
					t.Fatalf("the stream's result: %s", m.raw)
				}
				handlerReturned(t, d, 1)
			}
			if n := callsCounted(t, d, "ask_user", "ok"); n != 1 {
				t.Errorf("toolserverd_tool_calls_total{ok,ask_user} = %v, want 1", n)
			}
		})
	}
}
