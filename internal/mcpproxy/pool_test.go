package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

const statefulServerEnv = "TOOLSERVERD_TEST_STATEFUL_MCP"

// serveStatefulStdio is a stdio MCP server that keeps per-client state: a counter,
// and its pid. Tests start the test binary itself as this server.
func serveStatefulStdio() {
	var mu sync.Mutex
	n := 0
	s := mcpserver.NewMCPServer("stateful", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("grow", mcp.WithDescription("Adds a tool named grown (the server announces tools/list_changed).")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddTool(mcp.NewTool("grown"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("grown here"), nil
			})
			return mcp.NewToolResultText("grew"), nil
		})
	s.AddTool(mcp.NewTool("count", mcp.WithDescription("Counts calls in this process.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			n++
			return mcp.NewToolResultText(strconv.Itoa(n)), nil
		})
	s.AddTool(mcp.NewTool("pid", mcp.WithDescription("This process's id.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.Itoa(os.Getpid())), nil
		})
	s.AddTool(mcp.NewTool("wait", mcp.WithDescription("Waits until cancelled.")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	s.AddTool(mcp.NewTool("cwd", mcp.WithDescription("This process's working directory.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			wd, err := os.Getwd()
			if err != nil {
				return nil, err
			}
			return mcp.NewToolResultText(wd), nil
		})
	addSprayTool(s)
	if err := mcpserver.ServeStdio(s); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

func statefulServer(t *testing.T, name string) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return ServerConfig{Name: name, Transport: TransportStdio, Command: exe, Enabled: true,
		Env: map[string]string{statefulServerEnv: "1"}, Pooling: PoolPerSession}
}

// sessionCall calls a tool as daemon session sid ("" for none).
func (h *harness) sessionCall(ctx context.Context, t *testing.T, sid, name string) *tool.Result {
	t.Helper()
	e, ok := h.tools.Lookup(name)
	if !ok {
		t.Fatalf("tool %s is not registered (have %v)", name, h.tools.Names())
	}
	tc := &tool.Context{Context: ctx, CallID: "tc_test", ToolName: name, Progress: tool.NoProgress}
	if sid != "" {
		tc.Session = &tool.Session{ID: sid}
	}
	return h.tools.Run(e, toolmgr.Invocation{Ctx: tc, Args: json.RawMessage(`{}`)})
}

func (h *harness) sessionInt(t *testing.T, sid, name string) int {
	t.Helper()
	res := h.sessionCall(t.Context(), t, sid, name)
	if res.IsError {
		t.Fatalf("%s as %q: %s: %s", name, sid, res.ErrorKind, res.Text())
	}
	// The last line: a note that an earlier upstream session ended may come first.
	text := strings.TrimSpace(res.Text())
	n, err := strconv.Atoi(text[strings.LastIndexByte(text, '\n')+1:])
	if err != nil {
		t.Fatalf("%s as %q answered %q", name, sid, res.Text())
	}
	return n
}

// TestPerSessionPooling: each daemon session gets its own upstream process with its
// own state; calls without a session use the shared one; idle sessions close and
// their processes die; the next call opens a fresh one.
func TestPerSessionPooling(t *testing.T) {
	t.Parallel()
	cfg := statefulServer(t, "st")
	// Long enough that a loaded machine (a process start takes half a second at a
	// load of 8 on 2 cores) does not close a session between two of its calls.
	cfg.SessionIdleTimeout = 3 * time.Second
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: 100 * time.Millisecond})
	h.start(t)
	h.waitState(t, "st", StateReady, 30*time.Second)
	shared := h.stdioPid(t, "st")

	if a, b := h.sessionInt(t, "ses_a", "mcp__st__count"), h.sessionInt(t, "ses_a", "mcp__st__count"); a != 1 || b != 2 {
		t.Errorf("session a counted %d then %d, want 1 then 2", a, b)
	}
	if n := h.sessionInt(t, "ses_b", "mcp__st__count"); n != 1 {
		t.Errorf("session b counted %d, want 1: it has its own upstream session", n)
	}
	if n := h.sessionInt(t, "", "mcp__st__count"); n != 1 {
		t.Errorf("a call without a session counted %d on the shared connection, want 1", n)
	}
	pa, pb := h.sessionInt(t, "ses_a", "mcp__st__pid"), h.sessionInt(t, "ses_b", "mcp__st__pid")
	if pa == pb || pa == shared || pb == shared {
		t.Fatalf("pids: session a %d, session b %d, shared %d; want three processes", pa, pb, shared)
	}
	if st := h.status(t, "st"); st.UpstreamSessions != 2 {
		t.Errorf("upstream_sessions = %d, want 2", st.UpstreamSessions)
	}

	// Idle past the timeout: both close, their processes are gone, the shared one stays.
	if !eventually(20*time.Second, func() bool { return h.status(t, "st").UpstreamSessions == 0 }) {
		t.Fatalf("upstream sessions still open after the idle timeout: %d", h.status(t, "st").UpstreamSessions)
	}
	if !eventually(20*time.Second, func() bool { return !processAlive(pa) && !processAlive(pb) }) {
		t.Errorf("idle upstream processes %d, %d still alive", pa, pb)
	}
	if !processAlive(shared) {
		t.Error("the shared upstream process died with the idle sessions")
	}
	// The model is told its state went with the old upstream session, once.
	if res := h.sessionCall(t.Context(), t, "ses_a", "mcp__st__count"); res.IsError ||
		!strings.HasPrefix(res.Text(), "[mcp server st: the session it kept for this conversation was closed after 3s unused (session_idle_timeout); ") ||
		!strings.HasSuffix(strings.TrimSpace(res.Text()), "\n1") {
		t.Errorf("first call after the idle close: %s", res.Text())
	}

	// A session's process dying: the next call opens a new one.
	pa = h.sessionInt(t, "ses_a", "mcp__st__pid")
	if err := syscall.Kill(pa, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var again int
	if !eventually(10*time.Second, func() bool {
		res := h.sessionCall(t.Context(), t, "ses_a", "mcp__st__pid")
		if res.IsError {
			wantKind(t, res, tool.KindUnavailable)
			return false
		}
		// After a note that the killed one's state is gone.
		text := strings.TrimSpace(res.Text())
		again, _ = strconv.Atoi(text[strings.LastIndexByte(text, '\n')+1:])
		if !strings.Contains(text, "ended (the upstream went away)") {
			t.Errorf("no note that session a's upstream session ended: %s", text)
		}
		return true
	}) {
		t.Fatal("session a has no upstream session 10s after its process was killed")
	}
	if again == pa || again == 0 {
		t.Errorf("session a still on pid %d after it was killed (got %d)", pa, again)
	}

	h.m.Stop()
	for _, pid := range []int{again, shared} {
		if processAlive(pid) {
			t.Errorf("upstream process %d alive after Stop", pid)
		}
	}
}

// TestPerSessionPoolingCap: past max_sessions the least recently used idle session
// closes; with every session busy, a new one is refused as unavailable at once. A
// restart ends every session, including a call in flight.
func TestPerSessionPoolingCap(t *testing.T) {
	t.Parallel()
	cfg := statefulServer(t, "cap")
	cfg.MaxSessions = 1
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour})
	h.start(t)
	h.waitState(t, "cap", StateReady, 30*time.Second)

	pa := h.sessionInt(t, "ses_a", "mcp__cap__pid")
	pb := h.sessionInt(t, "ses_b", "mcp__cap__pid") // evicts a
	if pa == pb {
		t.Fatalf("sessions a and b share pid %d", pa)
	}
	if !eventually(20*time.Second, func() bool { return !processAlive(pa) }) {
		t.Errorf("evicted session a's process %d still alive", pa)
	}
	if st := h.status(t, "cap"); st.UpstreamSessions != 1 {
		t.Errorf("upstream_sessions = %d, want 1", st.UpstreamSessions)
	}

	// b busy: a cannot have a session now.
	busy := make(chan *tool.Result, 1)
	go func() { busy <- h.sessionCall(context.Background(), t, "ses_b", "mcp__cap__wait") }()
	if !eventually(10*time.Second, func() bool {
		h.m.server("cap").pool.mu.Lock()
		defer h.m.server("cap").pool.mu.Unlock()
		p := h.m.server("cap").pool.conns["ses_b"]
		return p != nil && p.inflight > 0
	}) {
		t.Fatal("the waiting call never started")
	}
	res := h.sessionCall(t.Context(), t, "ses_a", "mcp__cap__count")
	wantKind(t, res, tool.KindUnavailable)
	if !strings.Contains(res.Text(), "busy") {
		t.Errorf("refusal %q does not say the sessions are busy", res.Text())
	}

	// A restart ends b's upstream session, and the call waiting on it.
	if err := h.m.Restart("cap"); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-busy:
		wantKind(t, res, tool.KindUnavailable)
	case <-time.After(10 * time.Second):
		t.Fatal("a call on a per-session upstream still running 10s after a restart")
	}
	if !eventually(20*time.Second, func() bool { return !processAlive(pb) }) {
		t.Errorf("session b's process %d alive after a restart", pb)
	}
	h.waitState(t, "cap", StateReady, 30*time.Second)
	// a was evicted for b (its refused call while b was busy did not use the note up);
	// b's was ended by the restart.
	if res := h.sessionCall(t.Context(), t, "ses_a", "mcp__cap__count"); !strings.Contains(res.Text(), "was closed to make room for another session's (max_sessions 1)") ||
		!strings.HasSuffix(strings.TrimSpace(res.Text()), "\n1") {
		t.Errorf("session a after the restart: %s", res.Text())
	}
	if res := h.sessionCall(t.Context(), t, "ses_b", "mcp__cap__count"); !strings.Contains(res.Text(), "ended: the server was restarted") {
		t.Errorf("session b after the restart: %s", res.Text())
	}
}

// TestStdioListChanged: a stdio server that adds a tool announces
// tools/list_changed, and the proxy registers the new tool without a restart.
func TestStdioListChanged(t *testing.T) {
	t.Parallel()
	cfg := statefulServer(t, "grows")
	cfg.Pooling = PoolShared
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour})
	h.start(t)
	h.waitState(t, "grows", StateReady, 30*time.Second)
	if _, ok := h.tools.Lookup("mcp__grows__grown"); ok {
		t.Fatal("grown is registered before the server added it")
	}
	wantText(t, h.sessionCall(t.Context(), t, "", "mcp__grows__grow"), "grew")
	if !eventually(10*time.Second, func() bool { _, ok := h.tools.Lookup("mcp__grows__grown"); return ok }) {
		t.Fatalf("the added tool never appeared: %v", h.tools.Names())
	}
	wantText(t, h.sessionCall(t.Context(), t, "", "mcp__grows__grown"), "grown here")
}

// TestPerSessionClosedWithItsSession: a daemon session that is deleted has its
// upstream session closed at once (its process, a browser's, ends), not after the
// idle timeout; other daemon sessions keep theirs.
func TestPerSessionClosedWithItsSession(t *testing.T) {
	t.Parallel()
	cfg := statefulServer(t, "end")
	cfg.SessionIdleTimeout = time.Hour
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: 100 * time.Millisecond})
	h.start(t)
	h.waitState(t, "end", StateReady, 30*time.Second)

	pa, pb := h.sessionInt(t, "ses_a", "mcp__end__pid"), h.sessionInt(t, "ses_b", "mcp__end__pid")
	h.m.CloseSession(t.Context(), "ses_a")
	if st := h.status(t, "end"); st.UpstreamSessions != 1 {
		t.Errorf("upstream_sessions = %d after session a ended, want 1 (b's)", st.UpstreamSessions)
	}
	if !eventually(20*time.Second, func() bool { return !processAlive(pa) }) {
		t.Errorf("session a's upstream process %d still alive after the session ended", pa)
	}
	if !processAlive(pb) {
		t.Error("session b's upstream process died when session a ended")
	}
	if n := h.sessionInt(t, "ses_b", "mcp__end__count"); n != 1 {
		t.Errorf("session b counted %d, want 1 on its own upstream session", n)
	}
	h.m.CloseSession(t.Context(), "ses_unknown") // nothing to close: no harm
}

// TestStdioServerWorkDir: a stdio server runs in a directory of its own under
// Config.WorkDir, not in the daemon's working directory, which deployments make the
// data directory (the store, every session's workspace): a tool that writes files
// relative to its working directory, even one marked read-only (Playwright's
// browser_snapshot with a filename), reaches only its own.
func TestStdioServerWorkDir(t *testing.T) {
	t.Parallel()
	base := filepath.Join(t.TempDir(), "mcp")
	cfg := statefulServer(t, "wd")
	cfg.Pooling = PoolShared
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour, WorkDir: base})
	h.start(t)
	h.waitState(t, "wd", StateReady, 30*time.Second)
	got := strings.TrimSpace(h.sessionCall(t.Context(), t, "", "mcp__wd__cwd").Text())
	if want := filepath.Join(base, "wd"); got != want {
		daemon, _ := os.Getwd()
		t.Errorf("the stdio server runs in %q, want %q (the daemon's is %q)", got, want, daemon)
	}
}

// TestPerSessionHTTPEndedUpstream: a per_session HTTP server is told (DELETE with its
// Mcp-Session-Id) when the daemon closes an upstream session because its daemon
// session was deleted or the server restarted, as when it idles out. The connection
// was cut before its polite close, which then could not reach the server: one
// upstream session in three lived on in the server, with whatever it held, until the
// server itself was restarted.
func TestPerSessionHTTPEndedUpstream(t *testing.T) {
	t.Parallel()
	g := newGoServer(t)
	cfg := ServerConfig{Name: "gops", Transport: TransportStreamableHTTP, URL: g.url, Enabled: true,
		Pooling: PoolPerSession, SessionIdleTimeout: time.Hour}
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour})
	h.start(t)
	h.waitState(t, "gops", StateReady, 30*time.Second)

	open := func(n int) {
		t.Helper()
		for i := range n {
			if res := h.sessionCall(t.Context(), t, fmt.Sprintf("ses_%d", i), "mcp__gops__fail"); res.Text() != "the widget is broken" {
				t.Fatalf("call as ses_%d: %s: %s", i, res.ErrorKind, res.Text())
			}
		}
		if st := h.status(t, "gops"); st.UpstreamSessions != n {
			t.Fatalf("upstream_sessions = %d, want %d", st.UpstreamSessions, n)
		}
	}
	const n = 12
	open(n)
	for i := range n {
		h.m.CloseSession(t.Context(), fmt.Sprintf("ses_%d", i))
	}
	if !eventually(20*time.Second, func() bool { return g.endedSessions() == n }) {
		t.Errorf("the server was told of %d of the %d upstream sessions closed with their daemon sessions", g.endedSessions(), n)
	}

	open(n)
	before := g.endedSessions()
	if err := h.m.Restart("gops"); err != nil {
		t.Fatal(err)
	}
	// The restart ends the supervisor's own session too.
	if !eventually(20*time.Second, func() bool { return g.endedSessions()-before >= n+1 }) {
		t.Errorf("the server was told of %d sessions ended by a restart, want the %d per-session ones and the supervisor's", g.endedSessions()-before, n)
	}
}

// TestPooledSessionOpeningOutlivesItsCaller: a per-session server slower to start than
// a caller's deadline (a per-session browser; any server on a loaded machine) still
// gets its upstream session: the call that began the opening times out, the opening
// goes on within connect_timeout, and a later call of the same daemon session reaches
// it. The opening was abandoned with its caller: each call started a process, killed
// it at its deadline, and no call ever got through.
func TestPooledSessionOpeningOutlivesItsCaller(t *testing.T) {
	t.Parallel()
	prefix, pids := pidRecorder(t)
	script := npmPackage(t, "server-everything")
	h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{{
		Name: "slow", Transport: TransportStdio, Command: "sh", Enabled: true, Pooling: PoolPerSession,
		ConnectTimeout: 30 * time.Second, Args: []string{"-c", prefix + `sh -c 'sleep 1.5; exec node "$0" stdio' ` + script}}}})
	h.start(t)
	h.waitState(t, "slow", StateReady, 30*time.Second)
	e, _ := h.tools.Lookup("mcp__slow__echo")
	call := func(i int) *tool.Result {
		return h.tools.Run(e, toolmgr.Invocation{Ctx: &tool.Context{Context: t.Context(), CallID: fmt.Sprintf("tc_%d", i), Session: &tool.Session{ID: "ses_a"}, Progress: tool.NoProgress},
			Args: json.RawMessage(`{"message":"through"}`), Timeout: 300 * time.Millisecond})
	}
	wantKind(t, call(0), tool.KindTimeout)
	started := len(pids()) // the shared session's process, and the opening's
	var res *tool.Result
	for i := 1; i < 100; i++ {
		if res = call(i); !res.IsError {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantText(t, res, "Echo: through")
	if n := len(pids()); n != started {
		t.Errorf("%d processes started for the daemon session's calls, want the one opening (%d before the retries)", n-started+1, started)
	}
}
