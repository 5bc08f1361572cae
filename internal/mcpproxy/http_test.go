package mcpproxy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// httpCommon checks listing, a call, progress and cancellation on a ready server.
func httpCommon(t *testing.T, h *harness, server string) {
	t.Helper()
	st := h.status(t, server)
	if st.Tools < 12 {
		t.Fatalf("%s registered %d tools, want at least 12: %v", server, st.Tools, h.tools.Names())
	}
	wantText(t, h.call(t.Context(), t, "mcp__"+server+"__echo", `{"message":"over http"}`, nil), "Echo: over http")
	wantText(t, h.call(t.Context(), t, "mcp__"+server+"__get-sum", `{"a":40,"b":2}`, nil), "is 42.")

	prog := &progressLog{}
	res := h.call(t.Context(), t, "mcp__"+server+"__trigger-long-running-operation", `{"duration":1,"steps":4}`, prog)
	wantText(t, res, "Long running operation completed")
	// The last notification may be lost on the way (see DEPENDENCIES.md): ask for some.
	if got := prog.all(); len(got) < 2 || !slices.Contains(got, "1/4\n") {
		t.Errorf("progress = %q, want steps like 1/4, 2/4 …", got)
	}

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(400*time.Millisecond, cancel)
	start := time.Now()
	res = h.call(ctx, t, "mcp__"+server+"__trigger-long-running-operation", `{"duration":30,"steps":30}`, nil)
	// Cancelled (not finished, not timed out): the cancel ended the 30s operation.
	wantKind(t, res, tool.KindCancelled)
	t.Logf("cancelled call returned %s after the call began (cancel at 400ms)", time.Since(start))
	// Hang guard, still below the operation's 30s: a call that ran it out was not cancelled.
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("cancelled call returned after %s", took)
	}
	wantText(t, h.call(t.Context(), t, "mcp__"+server+"__echo", `{"message":"still there"}`, nil), "Echo: still there")
}

// TestStreamableHTTP runs server-everything over streamable HTTP, then restarts it on
// the same port: the old session answers 400 "No valid session ID", the proxy
// initializes a new session and the call goes through.
func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "streamableHttp", 0)
	// No health checks: the restart must be noticed through the 400 itself.
	h := newHarness(t, Config{HealthInterval: time.Hour, MaxBackoff: time.Second, Servers: []ServerConfig{
		{Name: "web", Transport: TransportStreamableHTTP, URL: srv.url(), Enabled: true}}})
	h.start(t)
	h.waitState(t, "web", StateReady, 30*time.Second)
	httpCommon(t, h, "web")

	srv.kill()
	srv = startHTTPServer(t, "streamableHttp", srv.port)
	start := time.Now()
	res := h.call(t.Context(), t, "mcp__web__echo", `{"message":"new session"}`, nil)
	wantText(t, res, "Echo: new session")
	t.Logf("call after the upstream restart succeeded in %s (re-initialized)", time.Since(start))
	if st := h.status(t, "web"); st.Restarts < 1 || st.State != StateReady {
		t.Errorf("after re-initializing: state %s restarts %d, want ready with at least 1 restart", st.State, st.Restarts)
	}

	// Down for good: calls answer unavailable at once; back: it reconnects.
	srv.kill()
	start = time.Now()
	res = h.call(t.Context(), t, "mcp__web__echo", `{"message":"x"}`, nil)
	wantKind(t, res, tool.KindUnavailable)
	t.Logf("call to a dead server answered in %s: %s", time.Since(start), res.Text())
	// It ended on the refused connection (not a timeout or a wait); the bound is a
	// hang guard only, far above that.
	if !strings.Contains(res.Text(), "connection refused") {
		t.Errorf("call to a dead server: %q, want it to end on the refused connection", res.Text())
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("call to a dead server took %s", took)
	}
	if !eventually(20*time.Second, func() bool { return h.status(t, "web").State != StateReady }) {
		t.Fatal("server still ready after a call found it dead")
	}
	start = time.Now()
	before := h.calls("web", outcomeUnavailable)
	res = h.call(t.Context(), t, "mcp__web__echo", `{"message":"x"}`, nil)
	wantKind(t, res, tool.KindUnavailable)
	t.Logf("call to a server known down answered in %s: %s", time.Since(start), res.Text())
	// At once means without trying the upstream: the answer is the server's down
	// state ("not available (failed|connecting, down since …)", or "its connection
	// was lost" before the supervisor noticed), which only a call that found no
	// live connection gets, not a transport error from trying one.
	if txt := res.Text(); !strings.Contains(txt, "mcp server web is not available (") && !strings.Contains(txt, "mcp server web is not available: its connection was lost (") {
		t.Errorf("call to a server known down: %q, want the down state without a connection attempt", res.Text())
	}
	if got := h.calls("web", outcomeUnavailable); got != before+1 {
		t.Errorf("calls_total{outcome=unavailable} went from %v to %v, want one more", before, got)
	}
	startHTTPServer(t, "streamableHttp", srv.port)
	h.waitState(t, "web", StateReady, 30*time.Second)
	wantText(t, h.call(t.Context(), t, "mcp__web__echo", `{"message":"back"}`, nil), "Echo: back")
}

// TestStreamableHTTPHealthCheck measures how long a dead HTTP server with no traffic
// takes to be noticed.
func TestStreamableHTTPHealthCheck(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "streamableHttp", 0)
	h := newHarness(t, Config{HealthInterval: 200 * time.Millisecond, MaxBackoff: time.Second, Servers: []ServerConfig{
		{Name: "idle", Transport: TransportStreamableHTTP, URL: srv.url(), Enabled: true}}})
	h.start(t)
	h.waitState(t, "idle", StateReady, 30*time.Second)
	killed := time.Now()
	srv.kill()
	if !eventually(20*time.Second, func() bool { return h.status(t, "idle").State != StateReady }) {
		t.Fatal("dead server not noticed within 20s")
	}
	t.Logf("dead idle server noticed %s after the kill (health interval 200ms)", time.Since(killed))
	// Status reports a dead connection at once; the gauge follows when the
	// supervisor acts on it, a moment later.
	if up := h.m.metrics.serverUp.WithLabelValues("idle"); !eventually(20*time.Second, func() bool { return readGauge(up) == 0 }) {
		t.Errorf("toolserverd_mcp_server_up = %v, want 0", readGauge(up))
	}
}

// TestSSE runs server-everything over the SSE transport; killing it fails an
// in-flight call at once (mcp-go alone would wait for the deadline) and the proxy
// reconnects when it is back.
func TestSSE(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "sse", 0)
	h := newHarness(t, Config{HealthInterval: time.Hour, MaxBackoff: time.Second, Servers: []ServerConfig{
		{Name: "events", Transport: TransportSSE, URL: srv.url(), Enabled: true}}})
	h.start(t)
	h.waitState(t, "events", StateReady, 30*time.Second)
	httpCommon(t, h, "events")

	// Killed once the call is known in flight (its first of 30 steps, one a
	// second, has come), not after a fixed sleep.
	inflight := make(chan *tool.Result, 1)
	running := &progressLog{}
	go func() {
		inflight <- h.call(context.Background(), t, "mcp__events__trigger-long-running-operation", `{"duration":30,"steps":30}`, running)
	}()
	if !eventually(30*time.Second, func() bool { return len(running.all()) > 0 }) {
		t.Fatal("the long-running operation reported no progress")
	}
	killed := time.Now()
	srv.kill()
	select {
	case res := <-inflight:
		wantKind(t, res, tool.KindUnavailable)
		if !strings.Contains(res.Text(), "whether it ran is unknown") {
			t.Errorf("in-flight SSE call answered %q; want it to say whether it ran is unknown", res.Text())
		}
		t.Logf("in-flight SSE call answered %s after the kill: %s", time.Since(killed), res.Text())
	// Hang guard, below the operation's 30s (mcp-go alone waits for it).
	case <-time.After(20 * time.Second):
		t.Fatal("in-flight SSE call still waiting 20s after the server died")
	}
	if !eventually(20*time.Second, func() bool { return h.status(t, "events").State != StateReady }) {
		t.Fatal("SSE server still ready 20s after it died")
	}
	startHTTPServer(t, "sse", srv.port)
	st := h.waitState(t, "events", StateReady, 30*time.Second)
	if st.Restarts < 1 {
		t.Errorf("restarts = %d, want at least 1", st.Restarts)
	}
	wantText(t, h.call(t.Context(), t, "mcp__events__echo", `{"message":"reconnected"}`, nil), "Echo: reconnected")
}

// TestStreamableHTTPKilledMidCall: an upstream killed while a call waits for its
// answer on the response stream; the call says the upstream went away, not
// mcp-go's "unexpected nil response".
func TestStreamableHTTPKilledMidCall(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "streamableHttp", 0)
	h := newHarness(t, Config{HealthInterval: time.Hour, MaxBackoff: time.Second, Servers: []ServerConfig{
		{Name: "web", Transport: TransportStreamableHTTP, URL: srv.url(), Enabled: true}}})
	h.start(t)
	h.waitState(t, "web", StateReady, 30*time.Second)
	prog := &progressLog{}
	inflight := make(chan *tool.Result, 1)
	go func() {
		inflight <- h.call(context.Background(), t, "mcp__web__trigger-long-running-operation", `{"duration":30,"steps":30}`, prog)
	}()
	if !eventually(10*time.Second, func() bool { return len(prog.all()) > 0 }) {
		t.Fatal("the call sent no progress")
	}
	srv.kill()
	select {
	case res := <-inflight:
		wantKind(t, res, tool.KindUnavailable)
		if !strings.Contains(res.Text(), "went away") || !strings.Contains(res.Text(), "whether it ran is unknown") {
			t.Errorf("result %q does not say the upstream went away and whether the call ran is unknown", res.Text())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight call still waiting 10s after the server died")
	}
}

// TestSSETransportAtStreamableServer: an operator who gives a streamable HTTP
// server transport sse was told only "start: unexpected status code: 400"; the
// error now quotes the server's answer and names the transport to use, as the
// opposite mistake's does.
func TestSSETransportAtStreamableServer(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "streamableHttp", 0)
	h := newHarness(t, Config{HealthInterval: time.Hour, MaxBackoff: time.Second, Servers: []ServerConfig{
		{Name: "mixed", Transport: TransportSSE, URL: srv.url(), Enabled: true, ConnectTimeout: 5 * time.Second}}})
	h.start(t)
	var st ServerStatus
	if !eventually(20*time.Second, func() bool { st = h.status(t, "mixed"); return st.LastError != "" }) {
		t.Fatalf("mixed: state %s, no error after 20s", st.State)
	}
	for _, want := range []string{"HTTP 400", "transport: streamable_http"} {
		if !strings.Contains(st.LastError, want) {
			t.Errorf("mixed: last error %q; want it to contain %q", st.LastError, want)
		}
	}
	t.Logf("sse at a streamable HTTP server: %s", st.LastError)
}
