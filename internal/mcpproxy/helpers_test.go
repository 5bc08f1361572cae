package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolserverd/toolserverd/internal/leakcheck"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

func TestMain(m *testing.M) {
	if os.Getenv(statefulServerEnv) == "1" {
		// This test binary, started as a stdio MCP server by a test.
		serveStatefulStdio()
		return
	}
	if mode := os.Getenv(goSDKServerEnv); mode != "" {
		serveGoSDK(mode)
		return
	}
	if mode := os.Getenv(hostileServerEnv); mode != "" {
		serveHostileStdio(mode)
		return
	}
	// mcp-go's server forgets each task it created after the task's ttl (a minute
	// or more) in a goroutine that sleeps until then: the in-process servers'
	// tasks, not the proxy's goroutines.
	leakcheck.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/mark3labs/mcp-go/server.(*MCPServer).scheduleTaskCleanup"))
}

// npmPackage returns the path of an installed test MCP server package
// (testdata/npm, installed by `npm ci`). Missing, the test is skipped, or fails
// under CI=true.
func npmPackage(t *testing.T, pkg string) string {
	t.Helper()
	_, err := exec.LookPath("node")
	dir := filepath.Join(repoRoot(t), "testdata", "npm", "node_modules", "@modelcontextprotocol", pkg)
	var missing string
	switch {
	case err != nil:
		missing = "node is not on PATH (install Node 20)"
	default:
		if _, err := os.Stat(filepath.Join(dir, "dist", "index.js")); err != nil {
			missing = fmt.Sprintf("%s is not installed: run `npm ci` in testdata/npm (%v)", pkg, err)
		}
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mcpproxy tests need real MCP servers and CI=true: %s", missing)
		}
		t.Skipf("skipping: %s", missing)
	}
	return filepath.Join(dir, "dist", "index.js")
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// testLogger logs to t until the test's cleanup ends, then drops records: mcp-go's
// reading goroutines may log while they wind down.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu     sync.Mutex
	t      *testing.T
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// harness is a Manager under test with its registry and metrics.
type harness struct {
	m     *Manager
	tools *toolmgr.Manager
	reg   *prometheus.Registry
}

func newHarness(t *testing.T, cfg Config, opts ...Option) *harness {
	t.Helper()
	h := &harness{tools: toolmgr.New(), reg: prometheus.NewRegistry()}
	m, err := New(cfg, h.tools, nil, testLogger(t), h.reg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.m = m
	t.Cleanup(m.Stop)
	return h
}

func (h *harness) start(t *testing.T) {
	t.Helper()
	if err := h.m.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

func (h *harness) status(t *testing.T, name string) ServerStatus {
	t.Helper()
	for _, s := range h.m.Status() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no status for server %s", name)
	return ServerStatus{}
}

// waitState waits until the server is in state st and returns its status.
func (h *harness) waitState(t *testing.T, name string, st State, within time.Duration) ServerStatus {
	t.Helper()
	var last ServerStatus
	ok := eventually(within, func() bool {
		last = h.status(t, name)
		return last.State == st
	})
	if !ok {
		t.Fatalf("server %s: state %s after %s, want %s (last error %q)", name, last.State, within, st, last.LastError)
	}
	return last
}

func (h *harness) calls(server, outcome string) float64 {
	return testutil.ToFloat64(h.m.metrics.calls.WithLabelValues(server, outcome))
}

func eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// progressLog records what a call emitted.
type progressLog struct {
	mu    sync.Mutex
	texts []string
	at    []time.Time
}

func (p *progressLog) Emit(_, text string) {
	p.mu.Lock()
	p.texts = append(p.texts, text)
	p.at = append(p.at, time.Now())
	p.mu.Unlock()
}

// when is when a text containing substr was first emitted, or zero.
func (p *progressLog) when(substr string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, text := range p.texts {
		if strings.Contains(text, substr) {
			return p.at[i]
		}
	}
	return time.Time{}
}

func (p *progressLog) Close() {}

func (p *progressLog) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.texts...)
}

// call runs a registered tool the way the daemon does: argument validation, then Run.
func (h *harness) call(ctx context.Context, t *testing.T, name, args string, prog tool.Progress) *tool.Result {
	t.Helper()
	e, ok := h.tools.Lookup(name)
	if !ok {
		t.Fatalf("tool %s is not registered (have %v)", name, h.tools.Names())
	}
	if prog == nil {
		prog = tool.NoProgress
	}
	return h.tools.Run(e, toolmgr.Invocation{
		Ctx:  &tool.Context{Context: ctx, CallID: "tc_test", ToolName: name, Progress: prog},
		Args: json.RawMessage(args),
	})
}

func wantText(t *testing.T, res *tool.Result, substr string) {
	t.Helper()
	if res.IsError {
		t.Fatalf("result is an error (%s): %s", res.ErrorKind, res.Text())
	}
	if !strings.Contains(res.Text(), substr) {
		t.Fatalf("result text %q does not contain %q", res.Text(), substr)
	}
}

func wantKind(t *testing.T, res *tool.Result, kind tool.ErrorKind) {
	t.Helper()
	if !res.IsError || res.ErrorKind != kind {
		t.Fatalf("result is_error=%v kind=%q (%s), want kind %q", res.IsError, res.ErrorKind, res.Text(), kind)
	}
}

func stdioEverything(t *testing.T, name string) ServerConfig {
	return ServerConfig{Name: name, Transport: TransportStdio, Command: "node",
		Args: []string{npmPackage(t, "server-everything"), "stdio"}, Enabled: true}
}

// httpServer is a server-everything process serving HTTP on a loopback port.
type httpServer struct {
	t    *testing.T
	mode string // streamableHttp or sse
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// listeningMarker starts the line the loopback preload writes to stderr once the
// server listens, followed by the port it got.
const listeningMarker = "toolserverd-test: listening on port "

// loopbackPreload makes server-everything listen on loopback only (Express listens
// on every interface) and say the port it got: with PORT=0 it binds a free port
// itself, and its own message says "port 0".
const loopbackPreload = `import net from "node:net";
import fs from "node:fs";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if ((typeof args[0] === "number" || typeof args[0] === "string") && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  this.once("listening", () => {
    const a = this.address();
    if (a && typeof a === "object") fs.writeSync(2, "` + listeningMarker + `" + a.port + "\n");
  });
  // Express 5 hands a listen error to the listen callback, which server-everything's
  // SSE mode takes for success: say it.
  this.once("error", (e) => fs.writeSync(2, "toolserverd-test: listen error " + e.code + "\n"));
  return listen.apply(this, args);
};
`

// startHTTPServer starts server-everything in mode on a free loopback port it binds
// itself (port 0), or on the given one (a restart: the behaviour under test is the
// server coming back at the same address). Once the port is given up, another
// listener of the test run may hold it for a moment: a restart that finds it in use
// is tried again, and logged.
func startHTTPServer(t *testing.T, mode string, port int) *httpServer {
	t.Helper()
	script := npmPackage(t, "server-everything")
	preload := filepath.Join(t.TempDir(), "loopback.mjs")
	if err := os.WriteFile(preload, []byte(loopbackPreload), 0o600); err != nil {
		t.Fatal(err)
	}
	const attempts = 10
	for attempt := 1; ; attempt++ {
		s, stderr := tryHTTPServer(t, script, preload, mode, port)
		if s != nil {
			return s
		}
		if port == 0 || attempt == attempts || !strings.Contains(stderr, "EADDRINUSE") {
			t.Fatalf("server-everything %s did not listen (port %d, attempt %d): %s", mode, port, attempt, stderr)
		}
		t.Logf("server-everything %s: port %d is in use (attempt %d of %d); trying again", mode, port, attempt, attempts)
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// tryHTTPServer starts server-everything once and waits until it says it listens
// (the server) or exits (nil and its stderr).
func tryHTTPServer(t *testing.T, script, preload, mode string, port int) (*httpServer, string) {
	t.Helper()
	cmd := exec.Command("node", "--import", "file://"+preload, script, mode)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	stderr := &listenWatcher{listening: make(chan int, 1)}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server-everything %s: %v", mode, err)
	}
	s := &httpServer{t: t, mode: mode, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	select {
	case s.port = <-stderr.listening:
	case <-s.done:
		return nil, stderr.String()
	case <-time.After(15 * time.Second):
		s.kill()
		t.Fatalf("server-everything %s did not say it listens: %s", mode, stderr.String())
	}
	t.Cleanup(s.kill)
	if port != 0 && s.port != port {
		t.Fatalf("server-everything %s listens on port %d, want %d", mode, s.port, port)
	}
	return s, ""
}

// listenWatcher is a server's stderr: it keeps the start of it and sends the port
// of the first listening line.
type listenWatcher struct {
	mu        sync.Mutex
	buf       []byte
	line      []byte
	said      bool
	listening chan int
}

func (w *listenWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) < 64<<10 {
		w.buf = append(w.buf, p...)
	}
	for _, b := range p {
		if b != '\n' {
			if len(w.line) < 1024 {
				w.line = append(w.line, b)
			}
			continue
		}
		if rest, ok := strings.CutPrefix(string(w.line), listeningMarker); ok && !w.said {
			if port, err := strconv.Atoi(rest); err == nil {
				w.said = true
				w.listening <- port
			}
		}
		w.line = w.line[:0]
	}
	return len(p), nil
}

func (w *listenWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

func (s *httpServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *httpServer) url() string {
	if s.mode == "sse" {
		return "http://" + s.addr() + "/sse"
	}
	return "http://" + s.addr() + "/mcp"
}

// kill ends the server at once and waits until it is gone.
func (s *httpServer) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// stdioPid is the current child of a stdio server.
func (h *harness) stdioPid(t *testing.T, name string) int {
	t.Helper()
	s := h.m.server(name)
	c := s.liveConn()
	if c == nil || c.pid == 0 {
		t.Fatalf("server %s has no live stdio child", name)
	}
	return c.pid
}

// groupMembers lists the live (not zombie) processes of process group pgid.
func groupMembers(pgid int) []int {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// After "(comm)": state, ppid, pgrp.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) >= 3 && fields[0] != "Z" && fields[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}

func processAlive(pid int) bool {
	// Signal 0 checks existence; a zombie awaiting its parent's wait counts as gone.
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) < 3 || fields[2] != "Z"
}

func readGauge(g interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}

// cancelLog is what a test server saw of requests (or tasks) it was asked to run and
// to cancel.
type cancelLog struct {
	mu        sync.Mutex
	ids       []string
	cancelled map[string]bool
}

func (c *cancelLog) started(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, id)
}

func (c *cancelLog) cancel(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled == nil {
		c.cancelled = map[string]bool{}
	}
	c.cancelled[id] = true
}

// uncancelled is how many were started, and the ids of those never cancelled.
func (c *cancelLog) uncancelled() (started int, left []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.ids {
		if !c.cancelled[id] {
			left = append(left, id)
		}
	}
	return len(c.ids), left
}

// sqliteStore is a new SQLite store, closed when the test ends; the replicas a test
// starts on it share it as replicas share a database.
func sqliteStore(t *testing.T) *store.SQLite {
	t.Helper()
	db, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "toolserverd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
