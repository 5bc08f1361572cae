package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// hangingListener accepts connections and never answers.
func hangingListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

// TestBrokenServersDoNotDelayStart starts a good server next to a missing command, a
// command that dies at once and an HTTP server that never answers.
func TestBrokenServersDoNotDelayStart(t *testing.T) {
	t.Parallel()
	good := stdioEverything(t, "good")
	h := newHarness(t, Config{MaxBackoff: 400 * time.Millisecond, Servers: []ServerConfig{
		good,
		{Name: "missing", Transport: TransportStdio, Command: "/nonexistent/mcp-server", Enabled: true},
		{Name: "dies", Transport: TransportStdio, Command: "node", Enabled: true,
			Args: []string{"-e", `console.error("boom: GITHUB_TOKEN is not set"); process.exit(3)`}},
		{Name: "hangs", Transport: TransportSSE, URL: "http://" + hangingListener(t) + "/sse", ConnectTimeout: time.Second, Enabled: true},
		// Never answers and may wait an hour: a Start that waited for connections
		// could not return before the hang guard below, and after Start returns this
		// server is still connecting, whatever the machine's load.
		{Name: "never", Transport: TransportSSE, URL: "http://" + hangingListener(t) + "/sse", ConnectTimeout: time.Hour, Enabled: true},
	}})
	start := time.Now()
	started := make(chan error, 1)
	go func() { started <- h.m.Start(context.Background()) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start still blocked 30s in, with a server configured that never answers (connect timeout 1h)")
	}
	t.Logf("Start returned in %s with four broken servers configured", time.Since(start))
	if st := h.status(t, "never"); st.State != StateConnecting || st.Restarts != 0 {
		t.Errorf("after Start returned: never-answering server %s with %d restarts, want still connecting (its first attempt)", st.State, st.Restarts)
	}
	h.waitState(t, "good", StateReady, 30*time.Second)
	t.Logf("good server ready %s after Start, next to three broken ones", time.Since(start))
	wantText(t, h.call(t.Context(), t, "mcp__good__echo", `{"message":"fine"}`, nil), "Echo: fine")

	want := map[string]string{
		"missing": "/nonexistent/mcp-server",
		"dies":    "boom: GITHUB_TOKEN is not set",
		"hangs":   "not connected within 1s (the server's connect_timeout; raise it for a server slow to start)",
	}
	for name, msg := range want {
		var st ServerStatus
		if !eventually(10*time.Second, func() bool {
			st = h.status(t, name)
			return st.Restarts >= 2 && strings.Contains(st.LastError, msg)
		}) {
			t.Errorf("%s: state %s restarts %d last error %q; want retries with an error containing %q", name, st.State, st.Restarts, st.LastError, msg)
			continue
		}
		if st.Tools != 0 {
			t.Errorf("%s has %d tools registered", name, st.Tools)
		}
		if got := testutil.ToFloat64(h.m.metrics.restarts.WithLabelValues(name)); got < 2 {
			t.Errorf("%s: restarts_total = %v, want at least 2", name, got)
		}
	}
	sum := h.m.Summary()
	if sum.Servers != 5 || sum.Ready != 1 || len(sum.Down) != 4 || !slices.Equal(sum.Starting, []string{"never"}) || h.m.Ready() {
		t.Errorf("summary = %+v, ready %v; want 1 of 5 ready, 4 down, never still starting", sum, h.m.Ready())
	}
}

// TestRunTimeChanges adds, restarts and removes a server while the proxy runs, with
// the changes persisted; a second proxy on the same store finds the added server.
func TestRunTimeChanges(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)

	h := newHarness(t, Config{HealthInterval: 500 * time.Millisecond}, WithStore(db))
	h.start(t)
	if len(h.m.Status()) != 0 {
		t.Fatalf("status = %+v, want no servers", h.m.Status())
	}
	dyn := stdioEverything(t, "dyn")
	dyn.Prefix = "ev_"
	dyn.CallTimeout = 5 * time.Second
	dyn.Env = map[string]string{"EXAMPLE_VAR": "x"}
	if err := h.m.Add(t.Context(), dyn); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if err := h.m.Add(t.Context(), dyn); !errors.Is(err, ErrServerExists) {
		t.Errorf("Add twice: %v, want ErrServerExists", err)
	}
	if err := h.m.Add(t.Context(), ServerConfig{Name: "Bad Name", Transport: TransportStdio, Command: "x"}); err == nil {
		t.Error("Add accepted an invalid name")
	}
	st := h.waitState(t, "dyn", StateReady, 30*time.Second)
	if !st.Persisted {
		t.Error("added server not marked persisted")
	}
	wantText(t, h.call(t.Context(), t, "ev_echo", `{"message":"prefixed"}`, nil), "Echo: prefixed")
	recs, err := db.ListMCPServers(t.Context())
	if err != nil || len(recs) != 1 || recs[0].Name != "dyn" {
		t.Fatalf("store holds %+v (%v), want dyn", recs, err)
	}

	pid := h.stdioPid(t, "dyn")
	if err := h.m.Restart("dyn"); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if !eventually(30*time.Second, func() bool {
		s := h.m.server("dyn")
		c := s.liveConn()
		return c != nil && c.pid != pid
	}) {
		t.Fatal("Restart did not replace the child")
	}
	if processAlive(pid) {
		t.Errorf("old child %d still alive after Restart", pid)
	}
	wantText(t, h.call(t.Context(), t, "ev_echo", `{"message":"restarted"}`, nil), "Echo: restarted")
	if err := h.m.Restart("nope"); !errors.Is(err, ErrUnknownServer) {
		t.Errorf("Restart(nope) = %v, want ErrUnknownServer", err)
	}

	// A second proxy on the same store (the daemon restarted) brings dyn back.
	h2 := newHarness(t, Config{}, WithStore(db))
	h2.start(t)
	h2.waitState(t, "dyn", StateReady, 30*time.Second)
	e, ok := h2.tools.Lookup("ev_get-sum")
	if !ok || e.Spec.Timeout != 5*time.Second {
		t.Fatalf("persisted server's tools: %v (get-sum found %v), want prefix ev_ and call timeout 5s kept", h2.tools.Names(), ok)
	}
	h2.m.Stop()

	newPid := h.stdioPid(t, "dyn")
	if err := h.m.Remove("dyn"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if names := h.tools.Names(); len(names) != 0 {
		t.Errorf("tools still registered after Remove: %v", names)
	}
	if len(h.m.Status()) != 0 {
		t.Errorf("status after Remove = %+v", h.m.Status())
	}
	if processAlive(newPid) {
		t.Errorf("child %d alive after Remove", newPid)
	}
	if recs, _ := db.ListMCPServers(t.Context()); len(recs) != 0 {
		t.Errorf("store still holds %+v after Remove", recs)
	}
	if err := h.m.Remove("dyn"); !errors.Is(err, ErrUnknownServer) {
		t.Errorf("Remove twice = %v, want ErrUnknownServer", err)
	}
}

// TestPersistedConfig checks what the store holds: the config as JSON, durations
// as strings, and a configured server winning over a stored one of the same name.
func TestPersistedConfig(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)
	stored := ServerConfig{Name: "dup", Transport: TransportStdio, Command: "/nonexistent/stored", Enabled: true, ConnectTimeout: 3 * time.Second}
	b, _ := json.Marshal(stored)
	if err := db.PutMCPServer(t.Context(), "dup", b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"connect_timeout":"3s"`) {
		t.Errorf("stored config %s does not hold the timeout as a duration string", b)
	}
	h := newHarness(t, Config{Servers: []ServerConfig{{Name: "dup", Transport: TransportStdio, Command: "/nonexistent/configured", Enabled: true}}}, WithStore(db))
	h.start(t)
	var st ServerStatus
	if !eventually(20*time.Second, func() bool { st = h.status(t, "dup"); return st.LastError != "" }) {
		t.Fatal("no connection attempt")
	}
	if st.Persisted || !strings.Contains(st.LastError, "/nonexistent/configured") {
		t.Errorf("status %+v: want the configured server, not the stored one", st)
	}
}

// TestStopKillsProcessGroup stops the proxy while a stdio server runs behind a shell:
// the shell and the server it started are gone when Stop returns, and no tool stays.
func TestStopKillsProcessGroup(t *testing.T) {
	t.Parallel()
	script := npmPackage(t, "server-everything")
	h := newHarness(t, Config{Servers: []ServerConfig{{Name: "wrapped", Transport: TransportStdio, Command: "sh",
		Args: []string{"-c", `node "$0" stdio; echo unreachable`, script}, Enabled: true}}})
	h.start(t)
	h.waitState(t, "wrapped", StateReady, 30*time.Second)
	pid := h.stdioPid(t, "wrapped")
	start := time.Now()
	h.m.Stop()
	t.Logf("Stop took %s", time.Since(start))
	// Killed members may linger briefly as zombies until their new parent reaps them.
	if !eventually(20*time.Second, func() bool { return len(groupMembers(pid)) == 0 }) {
		t.Errorf("process group %d still has live members %v after Stop", pid, groupMembers(pid))
	}
	if names := h.tools.Names(); len(names) != 0 {
		t.Errorf("tools registered after Stop: %v", names)
	}
	if err := h.m.Add(context.Background(), stdioEverything(t, "late")); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Add after Stop = %v, want ErrNotRunning", err)
	}
}

func TestDisabledServer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Servers: []ServerConfig{{Name: "off", Transport: TransportStdio, Command: "/nonexistent", Enabled: false}}})
	h.start(t)
	time.Sleep(100 * time.Millisecond)
	st := h.status(t, "off")
	if st.State != StateDisabled || st.Restarts != 0 || st.LastError != "" {
		t.Errorf("disabled server status = %+v", st)
	}
	if err := h.m.Restart("off"); !errors.Is(err, ErrServerDisabled) {
		t.Errorf("Restart of a disabled server = %v, want ErrServerDisabled", err)
	}
	if !h.m.Ready() || h.m.Summary().Disabled != 1 {
		t.Errorf("summary %+v ready %v: a disabled server is not down", h.m.Summary(), h.m.Ready())
	}
}

// TestNamespaceTakeover: a server whose tool names would overlap a running
// server's — a name with "__" (ev__evil: mcp__ev__evil__x), a prefix equal to,
// longer than or shorter than the running server's — is refused, at run time and
// from the store, and the running server keeps every one of its names.
func TestNamespaceTakeover(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)
	// Stored before names were checked: it would take ev's names (it sorts first).
	stored := stdioEverything(t, "e")
	stored.Prefix = "mcp__ev__"
	b, _ := json.Marshal(stored)
	if err := db.PutMCPServer(t.Context(), "e", b); err != nil {
		t.Fatal(err)
	}

	h := newHarness(t, Config{Servers: []ServerConfig{stdioEverything(t, "ev")}}, WithStore(db))
	h.start(t)
	h.waitState(t, "ev", StateReady, 30*time.Second)
	before := h.tools.Names()
	if names := statusNames(h); !slices.Equal(names, []string{"e", "ev"}) || h.m.Summary().Ready != 1 || !slices.Contains(before, "mcp__ev__echo") {
		t.Fatalf("servers %+v, tools %v: want ev ready, with mcp__ev__echo (the stored e skipped)", h.m.Status(), before)
	}

	evil := stdioEverything(t, "ev__evil")
	if err := h.m.Add(t.Context(), evil); err == nil || !strings.Contains(err.Error(), `"__"`) {
		t.Errorf("Add(ev__evil) = %v, want refused for its __", err)
	}
	for _, tt := range []struct{ name, prefix string }{
		{"e", "mcp__ev__"},   // ev's own prefix
		{"e", "mcp__ev__x_"}, // inside ev's name space
		{"e", "mcp__e"},      // a name space around ev's
		{"ev_", ""},          // mcp__ev___…
	} {
		sc := stdioEverything(t, tt.name)
		sc.Prefix = tt.prefix
		err := h.m.Add(t.Context(), sc)
		if !errors.Is(err, ErrNamespaceTaken) || !strings.Contains(err.Error(), "mcp server ev ") {
			t.Errorf("Add(%s, prefix %q) = %v, want ErrNamespaceTaken naming ev", tt.name, tt.prefix, err)
		}
	}
	if err := h.m.Add(t.Context(), ServerConfig{Name: "evx", Transport: TransportStdio, Command: "x"}); err != nil {
		t.Errorf("Add(evx), whose names do not overlap ev's: %v", err)
	}
	if after := h.tools.Names(); !slices.Equal(after, before) {
		t.Errorf("ev's tools changed: %v, were %v", after, before)
	}
	wantText(t, h.call(t.Context(), t, "mcp__ev__echo", `{"message":"still mine"}`, nil), "Echo: still mine")
	if recs, _ := db.ListMCPServers(t.Context()); len(recs) != 2 {
		t.Errorf("store holds %d servers, want the old e and evx (nothing refused was stored)", len(recs))
	}
}

// TestRemoveSkippedStoredServer: a server in the store that is not run — its name
// space overlaps a configured server's, or its stored configuration no longer
// validates (stored by an older version, edited by hand) — can still be removed:
// the log tells the operator to DELETE it, and that must not answer "unknown".
// Until then it is listed (state skipped, saying why). A name in neither the list
// nor the store stays unknown.
func TestRemoveSkippedStoredServer(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)
	clash := stdioEverything(t, "e")
	clash.Prefix = "mcp__ev__"
	b, _ := json.Marshal(clash)
	if err := db.PutMCPServer(t.Context(), "e", b); err != nil {
		t.Fatal(err)
	}
	if err := db.PutMCPServer(t.Context(), "bad", json.RawMessage(`{"transport":"carrier-pigeon","enabled":true}`)); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Servers: []ServerConfig{stdioEverything(t, "ev")}}, WithStore(db))
	h.start(t)
	h.waitState(t, "ev", StateReady, 30*time.Second)
	// Listed, so that the operator sees them and why (not only in the log), but
	// not down: nothing will connect them.
	if names := statusNames(h); !slices.Equal(names, []string{"bad", "e", "ev"}) {
		t.Fatalf("servers %v: want bad, e (skipped) and ev", names)
	}
	for _, st := range h.m.Status() {
		want := map[string]string{"bad": `transport "carrier-pigeon"`, "e": "mcp__ev__"}[st.Name]
		if want != "" && (st.State != StateSkipped || !st.Persisted || !strings.Contains(st.LastError, want)) {
			t.Errorf("status %+v: want state skipped, persisted, last_error saying %s", st, want)
		}
	}
	if sum := h.m.Summary(); !slices.Equal(sum.Skipped, []string{"bad", "e"}) || len(sum.Down) != 0 || !h.m.Ready() {
		t.Errorf("summary %+v: want bad and e skipped, none down", sum)
	}
	for _, name := range []string{"e", "bad"} {
		if err := h.m.Remove(name); err != nil {
			t.Errorf("Remove(%s), a stored server not run: %v", name, err)
		}
	}
	if recs, _ := db.ListMCPServers(t.Context()); len(recs) != 0 {
		t.Errorf("store still holds %d servers after their removal: %+v", len(recs), recs)
	}
	if names := statusNames(h); !slices.Equal(names, []string{"ev"}) {
		t.Errorf("servers after the removal: %v, want ev", names)
	}
	if err := h.m.Remove("nosuch"); !errors.Is(err, ErrUnknownServer) {
		t.Errorf("Remove(nosuch) = %v, want ErrUnknownServer", err)
	}
	wantText(t, h.call(t.Context(), t, "mcp__ev__echo", `{"message":"still here"}`, nil), "Echo: still here")
}

// TestRemoveDropsCallSeries: a call that found a server's tool before the server
// was removed ends after it; its outcome must not bring back the series Remove
// dropped (toolserverd_mcp_calls_total{server="fs"} would stay forever).
func TestRemoveDropsCallSeries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Servers: []ServerConfig{stdioEverything(t, "fs")}})
	h.start(t)
	h.waitState(t, "fs", StateReady, 30*time.Second)
	wantText(t, h.call(t.Context(), t, "mcp__fs__echo", `{"message":"x"}`, nil), "Echo: x")
	if n := testutil.CollectAndCount(h.m.metrics.calls); n != 1 {
		t.Fatalf("%d call series, want 1 (fs ok)", n)
	}
	e, ok := h.tools.Lookup("mcp__fs__echo")
	if !ok {
		t.Fatal("mcp__fs__echo is not registered")
	}
	if err := h.m.Remove("fs"); err != nil {
		t.Fatal(err)
	}
	res := h.tools.Run(e, toolmgr.Invocation{Ctx: &tool.Context{Context: t.Context(), CallID: "tc_late", ToolName: "mcp__fs__echo", Progress: tool.NoProgress},
		Args: json.RawMessage(`{"message":"late"}`)})
	wantKind(t, res, tool.KindUnavailable)
	if n := testutil.CollectAndCount(h.m.metrics.calls); n != 0 {
		t.Errorf("%d call series after Remove and a late call, want none", n)
	}
}

// TestRestartMidCall: a call waiting for its answer when the operator restarts its
// server is cut off after its request went out. It says so, and that whether it ran
// is unknown, over every transport, rather than what the transport reports about
// its closing (over HTTP "failed to send request: … context canceled", which reads
// as if the call never left). It says an operator restarted it, and not the stdio
// server's startup banner, which was appended as if the server had died saying it.
func TestRestartMidCall(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  func(t *testing.T) ServerConfig
		tool string
	}{
		{"stdio", func(t *testing.T) ServerConfig { return hostileServer(t, "srv", "banner") }, "hang"},
		{"streamable_http", func(t *testing.T) ServerConfig {
			return ServerConfig{Name: "srv", Transport: TransportStreamableHTTP, URL: newGoServer(t).url, Enabled: true}
		}, "slow"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{tt.cfg(t)}})
			h.start(t)
			h.waitState(t, "srv", StateReady, 30*time.Second)
			inflight := make(chan *tool.Result, 1)
			go func() { inflight <- h.call(context.Background(), t, "mcp__srv__"+tt.tool, `{}`, nil) }()
			time.Sleep(300 * time.Millisecond)
			if err := h.m.Restart("srv"); err != nil {
				t.Fatal(err)
			}
			select {
			case res := <-inflight:
				wantKind(t, res, tool.KindUnavailable)
				if txt := res.Text(); !strings.Contains(txt, "during the call of "+tt.tool) || !strings.Contains(txt, "whether it ran is unknown") ||
					!strings.Contains(txt, "restarted by an operator") || strings.Contains(txt, "listening on stdio") || strings.Contains(txt, "stderr") {
					t.Errorf("call cut off by a restart answered %q; want that the server was restarted during the call and whether it ran is unknown", txt)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("call still waiting 10s after its server was restarted")
			}
		})
	}
}
