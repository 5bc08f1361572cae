package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/leakcheck"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func TestMain(m *testing.M) {
	// Taken before the tests: taken after, it would ignore every goroutine they left.
	before := goleak.IgnoreCurrent()
	code := m.Run()
	pgtest.Stop()
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := leakcheck.Find(before); err != nil {
			os.Stderr.WriteString("goroutine leak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// TestRestartKeepsEverything runs against both stores: sessions and call records
// survive a restart, and a call the previous process left running is marked failed.
func TestRestartKeepsEverything(t *testing.T) {
	t.Parallel()
	onBothStores(t, nil, func(t *testing.T, opts daemonOpts) {
		d := startDaemon(t, opts)
		id := d.createSession(map[string]any{"available_tools": []string{"echo", "whoami"}, "metadata": map[string]any{"user": "ada"}})["id"].(string)
		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"c1","name":"echo","arguments":{"text":"persist me"}}]}`)
		tc := messages(t, evs)["c1"].str("call_id")

		// A call this replica was running when it "crashed".
		now := time.Now().UTC()
		orphan := &store.Call{ID: "tc_orphan", SessionID: id, Tenant: "default", ToolCallID: "c2", Name: "echo",
			Arguments: json.RawMessage(`{}`), Status: store.CallRunning, Owner: "test", CreatedAt: now, StartedAt: &now}
		// And one that waited for its turn, pending: it never ran.
		queued := &store.Call{ID: "tc_queued", SessionID: id, Tenant: "default", ToolCallID: "c5", Name: "echo",
			Arguments: json.RawMessage(`{}`), Status: store.CallPending, Owner: "test", CreatedAt: now}
		// And one that had started a background job, whose output was still open:
		// the job died with the process.
		job := &store.Call{ID: "tc_job", SessionID: id, Tenant: "default", ToolCallID: "c6", Name: "execute_command",
			Arguments: json.RawMessage(`{}`), Status: store.CallSucceeded, Result: tool.TextResult("Started background job"),
			Owner: "test", CreatedAt: now, StartedAt: &now, FinishedAt: &now, OutputOpen: true}
		if err := d.app.Store.WriteCalls(context.Background(), []*store.Call{orphan, queued, job}, nil); err != nil {
			t.Fatal(err)
		}
		d.stop()

		d2 := startDaemon(t, opts)
		code, _, body := d2.do("GET", "/v1/sessions/"+id, nil)
		if code != 200 || !strings.Contains(string(body), `"ada"`) || !strings.Contains(string(body), `"tools":["echo","whoami"]`) {
			t.Fatalf("session after restart: %d %s", code, body)
		}
		code, _, body = d2.do("GET", "/v1/tool-calls/"+tc, nil)
		if code != 200 || !strings.Contains(string(body), "persist me") || !strings.Contains(string(body), `"succeeded"`) {
			t.Fatalf("record after restart: %d %s", code, body)
		}
		code, _, body = d2.do("GET", "/v1/tool-calls/tc_orphan", nil)
		if code != 200 || !strings.Contains(string(body), `"status":"failed"`) || !strings.Contains(string(body), "daemon stopped") {
			t.Fatalf("orphaned call after restart: %d %s", code, body)
		}
		code, _, body = d2.do("GET", "/v1/tool-calls/tc_queued", nil)
		if code != 200 || !strings.Contains(string(body), `"status":"failed"`) || !strings.Contains(string(body), "it was not run") ||
			strings.Contains(string(body), "may have run") {
			t.Fatalf("pending call after restart: %d %s", code, body)
		}
		code, _, body = d2.do("GET", "/v1/tool-calls/tc_job", nil)
		if code != 200 || !strings.Contains(string(body), `"output_open":false`) || !strings.Contains(string(body), `"status":"succeeded"`) {
			t.Fatalf("call of a background job after restart: %d %s", code, body)
		}
		if code, _, body = d2.do("GET", "/v1/tool-calls?live=true", nil); code != 200 || strings.Contains(string(body), "tc_job") {
			t.Fatalf("live calls after restart: %d %s", code, body)
		}
		// The session still runs calls, with its whitelist.
		_, evs = d2.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"c3","name":"whoami"},{"id":"c4","name":"big"}]}`)
		msgs := messages(t, evs)
		if msgs["c3"].m["is_error"] != false || msgs["c4"].str("error_kind") != "not_found" {
			t.Fatalf("after restart: %s / %s", msgs["c3"].raw, msgs["c4"].raw)
		}
	})
}

// TestShutdownEndsEveryStream: calls still running when the drain deadline passes are
// cancelled, and every open stream still gets their messages and done before the
// connections close.
func TestShutdownEndsEveryStream(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.ShutdownTimeout = 100 * time.Millisecond }})
	const streams = 16
	type ended struct {
		body []byte
		err  error
	}
	out := make(chan ended, streams)
	for i := range streams {
		id := d.createSession(map[string]any{"available_tools": []string{"block"}})["id"].(string)
		go func() {
			resp, err := http.Post(d.url+"/v1/sessions/"+id+"/tool-calls", "application/json",
				strings.NewReader(fmt.Sprintf(`{"calls":[{"id":"b%d","name":"block"}]}`, i)))
			if err != nil {
				out <- ended{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			out <- ended{b, err}
		}()
	}
	for range streams {
		<-d.tools.blockStarts
	}
	// And a call waiting for an answer: its result must blame the shutdown, not the client.
	askID := d.createSession(map[string]any{"available_tools": []string{"ask_user"}})["id"].(string)
	asked := make(chan []byte, 1)
	go func() {
		_, _, b := d.do("POST", "/v1/sessions/"+askID+"/tool-calls", `{"calls":[{"id":"q","name":"ask_user","arguments":{"question":"?"}}]}`)
		asked <- b
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, b := d.do("GET", "/v1/sessions/"+askID+"/tool-calls/q", nil); strings.Contains(string(b), `"status":"waiting"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ask_user never waited for its answer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.stop()
	if b := <-asked; !strings.Contains(string(b), "the server shut down while ask_user waited") || !strings.Contains(string(b), `"goes_on":true`) || !strings.Contains(string(b), `"type":"done"`) {
		t.Errorf("ask_user's stream at shutdown: %s", b)
	}
	for range streams {
		e := <-out
		lines := strings.Split(strings.TrimSpace(string(e.body)), "\n")
		last := lines[len(lines)-1]
		if e.err != nil || len(lines) != 3 || !strings.Contains(lines[1], `"error_kind":"cancelled"`) || strings.Contains(lines[1], `"goes_on"`) || !strings.Contains(last, `"type":"done"`) {
			t.Errorf("stream at shutdown: err %v, %d lines, ending %s", e.err, len(lines), last)
		}
	}
}

// onBothStores runs test in parallel subtests "sqlite" and "postgres", each given
// daemonOpts (with mutate) for a fresh data dir and store of that kind: a daemon
// started again with the same opts finds what the one before it left.
func onBothStores(t *testing.T, mutate func(*config.Config), test func(t *testing.T, opts daemonOpts)) {
	t.Helper()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			opts := daemonOpts{dataDir: t.TempDir(), mutate: mutate}
			if backend == "postgres" {
				opts.store = pgtest.URL(t)
			}
			test(t, opts)
		})
	}
}
