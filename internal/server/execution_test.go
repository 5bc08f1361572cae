package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

func TestStrategiesAndSerialization(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)
	calls := func(name string, n int, ms int) string {
		var parts []string
		for i := 0; i < n; i++ {
			parts = append(parts, `{"id":"c`+string(rune('a'+i))+`","name":"`+name+`","arguments":{"ms":`+itoa(ms)+`}}`)
		}
		return strings.Join(parts, ",")
	}

	// Parallel (the default): concurrency-safe calls overlap.
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[`+calls("sleep_safe", 4, 150)+`]}`)
	if code != 200 || len(messages(t, evs)) != 4 {
		t.Fatalf("parallel: %d", code)
	}
	if got := d.tools.safeMax.Load(); got < 2 {
		t.Fatalf("parallel strategy ran safe calls one at a time (peak %d)", got)
	}

	// Unsafe calls are serialized per session, even in parallel and across batches.
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[`+calls("sleep_unsafe", 3, 40)+`]}`)
	}()
	code, evs = d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[`+calls("sleep_unsafe", 3, 40)+`]}`)
	<-done
	if code != 200 || len(messages(t, evs)) != 3 {
		t.Fatalf("unsafe: %d", code)
	}
	if got := d.tools.unsafeMax.Load(); got != 1 {
		t.Fatalf("unsafe calls overlapped within a session (peak %d)", got)
	}

	// Sequential keeps order: each call starts after the previous message.
	code, evs = d.stream("/v1/sessions/"+id+"/tool-calls", `{"strategy":"sequential","calls":[`+calls("sleep_safe", 3, 10)+`]}`)
	if code != 200 {
		t.Fatal(code)
	}
	var order []string
	for _, e := range evs {
		if e.str("type") != "tool_progress" {
			order = append(order, e.str("type")+":"+e.str("tool_call_id"))
		}
	}
	if got := strings.Join(order, ","); got != "tool_start:ca,message:ca,tool_start:cb,message:cb,tool_start:cc,message:cc,done:" {
		t.Fatalf("sequential order = %s", got)
	}

	// Batched with size 2: the third call starts only after the first two finish.
	code, evs = d.stream("/v1/sessions/"+id+"/tool-calls", `{"strategy":"batched","batch_size":2,"calls":[`+calls("sleep_safe", 3, 30)+`]}`)
	if code != 200 {
		t.Fatal(code)
	}
	pos := map[string]int{}
	for i, e := range evs {
		pos[e.str("type")+":"+e.str("tool_call_id")] = i
	}
	if pos["tool_start:cc"] < pos["message:ca"] || pos["tool_start:cc"] < pos["message:cb"] || pos["tool_start:cb"] > pos["message:ca"] {
		t.Fatalf("batched order wrong: %v", pos)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestUnsafeCallsRunInListedOrder: a model that writes a script, runs it and reads
// what it wrote, in one turn, means that order; the default parallel strategy keeps
// it: an unsafe call runs after every call listed before it, a safe call after the
// unsafe calls listed before it.
func TestUnsafeCallsRunInListedOrder(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"write_file", "execute_command", "sleep_safe", "read_file"}})["id"].(string)
	calls := []string{
		`{"id":"write","name":"write_file","arguments":{"path":"run.sh","content":"echo ran > out.txt\n"}}`,
		`{"id":"nap","name":"sleep_safe","arguments":{"ms":300}}`,
		`{"id":"run","name":"execute_command","arguments":{"command":"sh run.sh && echo run >> order.txt"}}`,
	}
	for i := range 6 {
		calls = append(calls, `{"id":"n`+itoa(i)+`","name":"execute_command","arguments":{"command":"echo `+itoa(i)+` >> order.txt"}}`)
	}
	calls = append(calls, `{"id":"read","name":"execute_command","arguments":{"command":"cat out.txt order.txt"}}`,
		`{"id":"peek","name":"read_file","arguments":{"path":"order.txt"}}`)
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[`+strings.Join(calls, ",")+`]}`)
	if code != 200 {
		t.Fatalf("tool-calls: %d", code)
	}
	msgs := messages(t, evs)
	for cid, m := range msgs {
		if m.m["is_error"] != false {
			t.Fatalf("%s failed: %s", cid, m.raw)
		}
	}
	want := "ran\nrun\n0\n1\n2\n3\n4\n5"
	got, _ := msgs["read"].m["message"].(map[string]any)["content"].(string)
	if !strings.Contains(got, want) {
		t.Fatalf("the unsafe calls did not run in the order listed: cat printed\n%s\nwant it to contain\n%s", got, want)
	}
	if got, _ := msgs["peek"].m["message"].(map[string]any)["content"].(string); !strings.Contains(got, "5") {
		t.Fatalf("the safe read listed last ran before the commands listed before it: it read\n%s", got)
	}
}

func TestInterruptSkipsUnstartedCalls(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)
	type res struct {
		code int
		evs  []event
	}
	out := make(chan res, 1)
	go func() {
		c, e := d.stream("/v1/sessions/"+id+"/tool-calls", `{"strategy":"sequential","calls":[
			{"id":"first","name":"block"},{"id":"second","name":"echo","arguments":{"text":"x"}},{"id":"third","name":"echo","arguments":{"text":"y"}}]}`)
		out <- res{c, e}
	}()
	<-d.tools.blockStarts
	code, _, body := d.do("POST", "/v1/sessions/"+id+"/interrupt", map[string]string{"message": "user changed their mind"})
	if code != 200 {
		t.Fatalf("interrupt: %d %s", code, body)
	}
	close(d.tools.release)
	r := <-out
	msgs := messages(t, r.evs)
	if msgs["first"].m["is_error"] != false {
		t.Fatalf("the running call was affected: %s", msgs["first"].raw)
	}
	for _, cid := range []string{"second", "third"} {
		m := msgs[cid]
		if m.str("error_kind") != "skipped" || !strings.Contains(string(m.raw), "user changed their mind") {
			t.Fatalf("%s = %s", cid, m.raw)
		}
	}
	// A later batch runs normally.
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"after","name":"echo","arguments":{"text":"z"}}]}`)
	if messages(t, evs)["after"].m["is_error"] != false {
		t.Fatal("a batch after the interrupt was skipped")
	}
	// The body is optional: absent, or empty and chunked (no Content-Length).
	for _, chunked := range []bool{false, true} {
		req, _ := http.NewRequest("POST", d.url+"/v1/sessions/"+id+"/interrupt", io.MultiReader())
		if chunked {
			req.ContentLength = -1
		} else {
			req.Body = nil
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("interrupt without a body (chunked %v): %d %s", chunked, resp.StatusCode, b)
		}
	}
}

func TestCancelAndDisconnect(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)

	// Cancel one call through the API.
	out := make(chan []event, 1)
	go func() {
		_, e := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"b1","name":"block"},{"id":"e1","name":"echo","arguments":{"text":"ok"}}]}`)
		out <- e
	}()
	tc := <-d.tools.blockStarts
	code, _, body := d.do("POST", "/v1/tool-calls/"+tc+"/cancel", nil)
	if code != 202 {
		t.Fatalf("cancel: %d %s", code, body)
	}
	msgs := messages(t, <-out)
	if msgs["b1"].str("error_kind") != "cancelled" || msgs["e1"].m["is_error"] != false {
		t.Fatalf("after cancel: %s / %s", msgs["b1"].raw, msgs["e1"].raw)
	}
	code, _, body = d.do("POST", "/v1/tool-calls/"+tc+"/cancel", nil)
	if code != 409 {
		t.Fatalf("second cancel: %d %s", code, body)
	}

	// A client that goes away cancels its calls; the record still gets the outcome.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+"/v1/sessions/"+id+"/tool-calls", strings.NewReader(`{"calls":[{"id":"gone","name":"block"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil || !strings.Contains(string(line), "tool_start") {
		t.Fatalf("first line %q: %v", line, err)
	}
	tc = <-d.tools.blockStarts
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, rec := d.do("GET", "/v1/tool-calls/"+tc, nil)
		if strings.Contains(string(rec), `"status":"failed"`) {
			if !strings.Contains(string(rec), `"error_kind":"cancelled"`) {
				t.Fatalf("record after disconnect: %s", rec)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("call not cancelled after the client left: %s", rec)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTruncationKeepsFullRecord(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.MaxToolResultTokens = 2000 }})
	id := d.createSession(map[string]any{"available_tools": []string{"big"}})["id"].(string)
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"b","name":"big"}]}`)
	m := messages(t, evs)["b"]
	content := m.m["message"].(map[string]any)["content"].(string)
	if m.m["truncated"] != true || !strings.Contains(content, "FIRST-LINE") || !strings.Contains(content, "LAST-LINE") ||
		!strings.Contains(content, "bytes removed here") || len(content) > 2000*8 {
		t.Fatalf("truncated message: truncated=%v len=%d", m.m["truncated"], len(content))
	}
	_, _, rec := d.do("GET", "/v1/tool-calls/"+m.str("call_id"), nil)
	if len(rec) < 400_000 || strings.Contains(string(rec), "bytes removed here") {
		t.Fatalf("record is not the full result (%d bytes)", len(rec))
	}
}

func TestPanickingToolDoesNotKillDaemon(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)
	for i := 0; i < 3; i++ {
		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"p","name":"panics"},{"id":"e","name":"echo","arguments":{"text":"alive"}}]}`)
		msgs := messages(t, evs)
		if msgs["p"].str("error_kind") != "failed" || strings.Contains(string(msgs["p"].raw), "goroutine") {
			t.Fatalf("panic result leaks internals or has wrong kind: %s", msgs["p"].raw)
		}
		if msgs["e"].m["is_error"] != false {
			t.Fatal("daemon broken after a panic")
		}
	}
	code, _, metrics := d.do("GET", "/metrics", nil)
	if code != 200 {
		t.Fatal(code)
	}
	for _, want := range []string{
		`toolserverd_tool_calls_total{outcome="failed",tool="panics"} 3`,
		`toolserverd_tool_calls_total{outcome="ok",tool="echo"} 3`,
		`toolserverd_tool_calls_in_flight 0`,
		`toolserverd_tool_call_duration_seconds_count{tool="echo"} 3`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestOneShotAndHealth(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	code, hdr, body := d.do("POST", "/v1/tool-calls?format=openai", `{"session":{"available_tools":["echo"]},"calls":[{"id":"x","name":"echo","arguments":"{\"text\":\"one-shot\"}"}]}`)
	if code != 200 || !strings.HasPrefix(hdr.Get("X-Session-Id"), "ses_") {
		t.Fatalf("one-shot: %d %s", code, body)
	}
	msgs := messages(t, parseNDJSON(t, body))
	if !strings.Contains(string(msgs["x"].raw), "one-shot") {
		t.Fatalf("one-shot result %s", msgs["x"].raw)
	}
	code, _, body = d.do("GET", "/v1/sessions/"+hdr.Get("X-Session-Id"), nil)
	if code != 200 {
		t.Fatalf("one-shot session not persisted: %d %s", code, body)
	}
	// A one-shot request refused for its batch makes no session.
	live := d.app.Sessions.Live()
	for _, bad := range []string{`{"session":{},"calls":[]}`, `{"session":{},"calls":[{"id":"a","name":"echo"},{"id":"a","name":"echo"}]}`,
		`{"session":{},"calls":[{"name":"echo"}]}`, `{"session":{},"calls":[{"id":"a","name":"echo"}],"strategy":"random"}`} {
		code, hdr, body := d.do("POST", "/v1/tool-calls", bad)
		if code != 400 || hdr.Get("X-Session-Id") != "" {
			t.Errorf("%s: %d, X-Session-Id %q, %s; want 400 and no session", bad, code, hdr.Get("X-Session-Id"), body)
		}
	}
	if n := d.app.Sessions.Live(); n != live {
		t.Errorf("sessions in memory %d after refused one-shot requests, want %d", n, live)
	}
	code, _, body = d.do("GET", "/readyz", nil)
	if code != 200 || !strings.Contains(string(body), `"store":"ok"`) {
		t.Fatalf("readyz: %d %s", code, body)
	}
	validate(t, "Readiness", body)
	code, _, _ = d.do("GET", "/healthz", nil)
	if code != 200 {
		t.Fatal(code)
	}
}

// TestReadOnlyRecordWhileRunning: a read-only call's record waits for its result
// (calls.record_fold_window) instead of being written when the call starts, yet the
// API shows the call while it runs, by id and in lists, and its result after.
func TestReadOnlyRecordWhileRunning(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Calls.RecordFoldWindow = time.Hour }})
	id := d.createSession(map[string]any{"available_tools": []string{"block_read"}})["id"].(string)
	out := make(chan []event, 1)
	go func() {
		_, e := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"r1","name":"block_read"}]}`)
		out <- e
	}()
	tc := <-d.tools.blockStarts
	code, _, body := d.do("GET", "/v1/tool-calls/"+tc, nil)
	if code != 200 || !strings.Contains(string(body), `"status":"running"`) {
		t.Fatalf("GET a running read-only call: %d %s", code, body)
	}
	code, _, body = d.do("GET", "/v1/sessions/"+id+"/tool-calls/r1", nil)
	if code != 200 || !strings.Contains(string(body), tc) {
		t.Fatalf("GET it by tool_call_id: %d %s", code, body)
	}
	code, _, body = d.do("GET", "/v1/tool-calls?status=running", nil)
	if code != 200 || !strings.Contains(string(body), tc) {
		t.Fatalf("list running calls: %d %s, want %s in it", code, body, tc)
	}
	close(d.tools.release)
	msgs := messages(t, <-out)
	if msgs["r1"].m["is_error"] != false {
		t.Fatalf("message: %s", msgs["r1"].raw)
	}
	code, _, body = d.do("GET", "/v1/tool-calls/"+tc, nil)
	if code != 200 || !strings.Contains(string(body), `"status":"succeeded"`) || !strings.Contains(string(body), "released") {
		t.Fatalf("GET after the result: %d %s", code, body)
	}
}

// TestRecordFoldMetrics: read-only calls that end within the fold window are written
// as one row each, and /metrics counts it.
func TestRecordFoldMetrics(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Calls.RecordFoldWindow = time.Hour }})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	for i := range 3 {
		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", fmt.Sprintf(`{"calls":[{"id":"e%d","name":"echo","arguments":{"text":"x"}}]}`, i))
		if m := messages(t, evs)[fmt.Sprintf("e%d", i)]; m.m["is_error"] != false {
			t.Fatalf("echo: %s", m.raw)
		}
	}
	_, _, metrics := d.do("GET", "/metrics", nil)
	for _, want := range []string{
		"toolserverd_store_call_records_folded_total 3",
		"toolserverd_store_call_record_writes_total 6",
	} {
		if !strings.Contains(string(metrics), want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestHugeTimeout: a timeout_ms too large for a duration means the server's maximum,
// not a wrapped-around one of a few microseconds.
func TestHugeTimeout(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"sleep_safe"}})["id"].(string)
	for _, ms := range []string{"18446744073709552", "9223372036854775807", "9223372036854"} {
		code, evs := d.stream("/v1/sessions/"+id+"/tool-calls",
			`{"timeout_ms":`+ms+`,"calls":[{"id":"s","name":"sleep_safe","arguments":{"ms":50}}]}`)
		if code != 200 {
			t.Fatalf("timeout_ms %s: %d %s", ms, code, evs[0].raw)
		}
		if m := messages(t, evs)["s"]; m.m["is_error"] != false {
			t.Errorf("timeout_ms %s: %s; want the sleep to finish", ms, m.raw)
		}
	}
}

// TestCallWithoutToolName: a call that names no tool is answered invalid_args, and
// recorded (under a placeholder name), not refused as unrecordable.
func TestCallWithoutToolName(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"x"},{"id":"e","name":"echo","arguments":{"text":"ok"}}]}`)
	msgs := messages(t, evs)
	if m := msgs["x"]; m.m["is_error"] != true || m.str("error_kind") != "invalid_args" || !strings.Contains(string(m.raw), "the call has no tool name") {
		t.Fatalf("message of the call without a name: %s", m.raw)
	}
	if msgs["e"].m["is_error"] != false {
		t.Fatalf("the other call: %s", msgs["e"].raw)
	}
	code, _, body := d.do("GET", "/v1/sessions/"+id+"/tool-calls/x", nil)
	var rec map[string]any
	if err := json.Unmarshal(body, &rec); code != http.StatusOK || err != nil {
		t.Fatalf("record of the call without a name: %d %s", code, body)
	}
	if rec["status"] != "failed" || rec["error_kind"] != "invalid_args" || rec["name"] != "(no name)" || rec["started_at"] != nil {
		t.Fatalf("record of the call without a name: %v", rec)
	}
}
