package mcpproxy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestStdioEverything drives server-everything over stdio: listing, naming,
// annotations, calls, content mapping, validation, progress and cancellation.
func TestStdioEverything(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Servers: []ServerConfig{stdioEverything(t, "everything")}, HealthInterval: time.Second})
	h.start(t)
	st := h.waitState(t, "everything", StateReady, 30*time.Second)
	if st.Tools < 12 {
		t.Fatalf("everything registered %d tools, want at least 12: %v", st.Tools, h.tools.Names())
	}
	for _, name := range []string{"mcp__everything__echo", "mcp__everything__get-sum", "mcp__everything__trigger-long-running-operation"} {
		if _, ok := h.tools.Lookup(name); !ok {
			t.Fatalf("%s is not registered; have %v", name, h.tools.Names())
		}
	}

	t.Run("spec", func(t *testing.T) {
		e, _ := h.tools.Lookup("mcp__everything__get-sum")
		s := e.Spec
		if s.Source != "mcp:everything" || s.Label != "Get Sum Tool" || !s.ReadOnly || !s.ConcurrencySafe || s.Risk != tool.RiskLow {
			t.Errorf("get-sum spec = source %q label %q read_only %v concurrency_safe %v risk %q", s.Source, s.Label, s.ReadOnly, s.ConcurrencySafe, s.Risk)
		}
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(s.Parameters, &schema); err != nil || schema.Type != "object" || schema.Properties["a"] == nil || !slices.Contains(schema.Required, "b") {
			t.Errorf("get-sum parameters = %s (%v)", s.Parameters, err)
		}
		if s.Timeout != DefaultCallTimeout {
			t.Errorf("timeout = %s, want the server's call timeout %s", s.Timeout, DefaultCallTimeout)
		}
		if s.OutputSchema != nil {
			t.Errorf("get-sum declares no output schema, spec has %s", s.OutputSchema)
		}
	})

	t.Run("output schema as the server wrote it", func(t *testing.T) {
		e, _ := h.tools.Lookup("mcp__everything__get-structured-content")
		var schema map[string]any
		if err := json.Unmarshal(e.Spec.OutputSchema, &schema); err != nil {
			t.Fatalf("output schema %s: %v", e.Spec.OutputSchema, err)
		}
		props, _ := schema["properties"].(map[string]any)
		// $schema is not among what mcp-go's typed decoding keeps: it is here because
		// the listing's own bytes are.
		if schema["type"] != "object" || props["temperature"] == nil || schema["additionalProperties"] != false ||
			schema["$schema"] != "http://json-schema.org/draft-07/schema#" {
			t.Errorf("output schema = %s, want server-everything's weather schema with $schema kept", e.Spec.OutputSchema)
		}
	})

	t.Run("echo and get-sum", func(t *testing.T) {
		wantText(t, h.call(t.Context(), t, "mcp__everything__echo", `{"message":"hello ü"}`, nil), "Echo: hello ü")
		wantText(t, h.call(t.Context(), t, "mcp__everything__get-sum", `{"a":2,"b":3.5}`, nil), "The sum of 2 and 3.5 is 5.5.")
	})

	t.Run("bad arguments never reach the server", func(t *testing.T) {
		before := h.calls("everything", outcomeOK) + h.calls("everything", outcomeFailed) + h.calls("everything", outcomeInvalidArgs)
		res := h.call(t.Context(), t, "mcp__everything__get-sum", `{"a":"two"}`, nil)
		wantKind(t, res, tool.KindInvalidArgs)
		if !strings.Contains(res.Text(), "/a") || !strings.Contains(res.Text(), "/b") && !strings.Contains(res.Text(), "b") {
			t.Errorf("invalid_args text %q should name /a and the missing b", res.Text())
		}
		after := h.calls("everything", outcomeOK) + h.calls("everything", outcomeFailed) + h.calls("everything", outcomeInvalidArgs)
		if after != before {
			t.Errorf("a call with invalid arguments reached the proxy (%v calls before, %v after)", before, after)
		}
	})

	t.Run("content blocks", func(t *testing.T) {
		res := h.call(t.Context(), t, "mcp__everything__get-tiny-image", `{}`, nil)
		var img *tool.Content
		for i := range res.Content {
			if res.Content[i].Type == tool.ContentImage {
				img = &res.Content[i]
			}
		}
		if img == nil || img.MimeType != "image/png" || len(img.Data) < 100 {
			t.Errorf("get-tiny-image content = %+v, want a base64 image/png block", res.Content)
		}
		res = h.call(t.Context(), t, "mcp__everything__get-resource-links", `{"count":2}`, nil)
		var uris []string
		for _, c := range res.Content {
			if c.Type == tool.ContentResource && c.URI != "" {
				uris = append(uris, c.URI)
			}
		}
		if len(uris) != 2 {
			t.Errorf("get-resource-links gave resource URIs %v, want 2 (content %+v)", uris, res.Content)
		}
		res = h.call(t.Context(), t, "mcp__everything__get-structured-content", `{"location":"New York"}`, nil)
		var weather struct {
			Temperature *float64 `json:"temperature"`
		}
		if err := json.Unmarshal(res.Structured, &weather); err != nil || weather.Temperature == nil {
			t.Errorf("structured = %s (%v), want the weather object", res.Structured, err)
		}
	})

	t.Run("progress reaches Emit", func(t *testing.T) {
		prog := &progressLog{}
		res := h.call(t.Context(), t, "mcp__everything__trigger-long-running-operation", `{"duration":1,"steps":4}`, prog)
		wantText(t, res, "Long running operation completed")
		got := prog.all()
		if len(got) < 3 || !slices.Contains(got, "1/4\n") {
			t.Errorf("progress = %q, want steps like 1/4, 2/4 …", got)
		}
	})

	t.Run("cancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel)
		start := time.Now()
		res := h.call(ctx, t, "mcp__everything__trigger-long-running-operation", `{"duration":30,"steps":30}`, nil)
		// Cancelled, not finished or timed out: the cancel ended the 30s operation.
		wantKind(t, res, tool.KindCancelled)
		t.Logf("cancelled call returned %s after it began (cancel at 500ms)", time.Since(start))
		// Hang guard, below the operation's 30s.
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("cancelled call returned after %s", took)
		}
		// The server is still fine.
		wantText(t, h.call(t.Context(), t, "mcp__everything__echo", `{"message":"after"}`, nil), "Echo: after")
	})

	t.Run("call timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
		defer cancel()
		res := h.call(ctx, t, "mcp__everything__trigger-long-running-operation", `{"duration":10,"steps":2}`, nil)
		wantKind(t, res, tool.KindTimeout)
	})
}

// TestStdioFilesystem checks server-filesystem: a read inside the allowed directory
// works, one outside comes back is_error.
func TestStdioFilesystem(t *testing.T) {
	t.Parallel()
	allowed := t.TempDir()
	if err := os.WriteFile(filepath.Join(allowed, "hello.txt"), []byte("inside the sandbox"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Servers: []ServerConfig{{Name: "fs", Transport: TransportStdio, Command: "node",
		Args: []string{npmPackage(t, "server-filesystem"), allowed}, Enabled: true}}})
	h.start(t)
	st := h.waitState(t, "fs", StateReady, 30*time.Second)
	if st.Tools != 14 {
		t.Errorf("filesystem registered %d tools, want 14: %v", st.Tools, h.tools.Names())
	}
	e, ok := h.tools.Lookup("mcp__fs__write_file")
	if !ok {
		t.Fatalf("mcp__fs__write_file is not registered: %v", h.tools.Names())
	}
	if e.Spec.Risk != tool.RiskHigh || e.Spec.ReadOnly {
		t.Errorf("write_file (destructiveHint) spec = %+v, want risk high, not read-only", e.Spec)
	}

	wantText(t, h.call(t.Context(), t, "mcp__fs__read_text_file", `{"path":"`+filepath.Join(allowed, "hello.txt")+`"}`, nil), "inside the sandbox")
	res := h.call(t.Context(), t, "mcp__fs__read_text_file", `{"path":"`+outside+`"}`, nil)
	wantKind(t, res, tool.KindFailed)
	if strings.Contains(res.Text(), "outside") && !strings.Contains(strings.ToLower(res.Text()), "denied") && !strings.Contains(strings.ToLower(res.Text()), "not allowed") {
		t.Errorf("outside read returned %q", res.Text())
	}
	if got := h.calls("fs", outcomeError); got != 1 {
		t.Errorf("calls_total{outcome=error} = %v, want 1", got)
	}
}

// TestStdioKilledChild kills a stdio server mid-life: its tools answer unavailable at
// once, it is restarted with backoff, and works again.
func TestStdioKilledChild(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Servers: []ServerConfig{stdioEverything(t, "crashy")}, HealthInterval: time.Hour, MaxBackoff: 2 * time.Second})
	h.start(t)
	h.waitState(t, "crashy", StateReady, 30*time.Second)
	pid := h.stdioPid(t, "crashy")

	// A call in flight when the child dies ends at once.
	// In flight is known, not assumed after a fixed sleep: the server has reported
	// the first of its 30 steps (one a second).
	inflight := make(chan *tool.Result, 1)
	running := &progressLog{}
	go func() {
		inflight <- h.call(context.Background(), t, "mcp__crashy__trigger-long-running-operation", `{"duration":30,"steps":30}`, running)
	}()
	if !eventually(30*time.Second, func() bool { return len(running.all()) > 0 }) {
		t.Fatal("the long-running operation reported no progress")
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-inflight:
		wantKind(t, res, tool.KindUnavailable)
		// The request had reached the server: the model must not read that it did
		// not run (and repeat a call that did), nor transport jargon alone.
		if txt := res.Text(); !strings.Contains(txt, "during the call of trigger-long-running-operation") ||
			!strings.Contains(txt, "whether it ran is unknown") {
			t.Errorf("in-flight call answered %q; want it to say the server went away during the call and whether it ran is unknown", txt)
		}
		// How the process ended is said when its stderr closed within lastWordsWait,
		// which a busy machine may miss (TestStdioExitReadAfterReap covers the reap).
		if txt := res.Text(); strings.Contains(txt, "the process ") && !strings.Contains(txt, "the process was killed by SIGKILL") {
			t.Errorf("in-flight call answered %q; want the signal that killed the server", txt)
		}
		t.Logf("in-flight call answered %s after the kill: %s", time.Since(killed), res.Text())
	// Hang guard, below the operation's 30s.
	case <-time.After(20 * time.Second):
		t.Fatal("in-flight call still running 20s after its server was killed")
	}

	// Detected without any health check (interval 1h): the child's stderr closing.
	if !eventually(20*time.Second, func() bool { return h.status(t, "crashy").State != StateReady }) {
		t.Fatal("server still ready 20s after its child was killed")
	}
	t.Logf("dead server detected %s after the kill", time.Since(killed))
	// The operator reads how the process ended, not transport jargon alone.
	if !eventually(20*time.Second, func() bool {
		return strings.Contains(h.status(t, "crashy").LastError, "the process was killed by SIGKILL")
	}) {
		t.Errorf("last error %q; want how the process ended", h.status(t, "crashy").LastError)
	}
	if res := h.call(t.Context(), t, "mcp__crashy__echo", `{"message":"x"}`, nil); res.IsError {
		wantKind(t, res, tool.KindUnavailable)
	}

	st := h.waitState(t, "crashy", StateReady, 30*time.Second)
	t.Logf("back after %s", time.Since(killed))
	if st.Restarts < 1 {
		t.Errorf("restarts = %d, want at least 1", st.Restarts)
	}
	if newPid := h.stdioPid(t, "crashy"); newPid == pid {
		t.Errorf("same pid %d after restart", pid)
	}
	if processAlive(pid) {
		t.Errorf("killed child %d was not reaped", pid)
	}
	wantText(t, h.call(t.Context(), t, "mcp__crashy__echo", `{"message":"again"}`, nil), "Echo: again")
	if got := h.calls("crashy", outcomeUnavailable); got < 1 {
		t.Errorf("calls_total{outcome=unavailable} = %v, want at least 1", got)
	}
}

// TestStdioHungServer stops (SIGSTOP) a stdio server: it still holds its pipes, so
// only missed health checks show it is gone. Two missed pings mark it dead (even
// with a tool-list refresh stuck on it), the call waiting on it ends, and a fresh
// child replaces it.
func TestStdioHungServer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Servers: []ServerConfig{stdioEverything(t, "hung")}, HealthInterval: 300 * time.Millisecond, MaxBackoff: time.Second})
	h.start(t)
	h.waitState(t, "hung", StateReady, 30*time.Second)
	pid := h.stdioPid(t, "hung")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// A tools/list in flight to the hung server must not hold up the health checks.
	signal(h.m.server("hung").refresh)
	res := h.call(t.Context(), t, "mcp__hung__echo", `{"message":"anyone?"}`, nil)
	wantKind(t, res, tool.KindUnavailable)
	t.Logf("call to the hung server answered unavailable after %s: %s", time.Since(stopped), res.Text())
	// The daemon killed the hung child itself: "killed by SIGKILL" alone would send an
	// operator looking for who did (the OOM killer?).
	if txt := res.Text(); strings.Contains(txt, "the process ") && !strings.Contains(txt, "the process was killed by toolserverd (SIGKILL)") {
		t.Errorf("call to the hung server answered %q; want it to say toolserverd killed the process", txt)
	}
	// Unavailable (not timed out) means the missed health checks ended it; the
	// bound is a hang guard, below the 60s call timeout.
	if took := time.Since(stopped); took > 30*time.Second {
		t.Errorf("call waited %s on a hung server", took)
	}
	h.waitState(t, "hung", StateReady, 30*time.Second)
	if h.stdioPid(t, "hung") == pid || processAlive(pid) {
		t.Errorf("hung child %d was not replaced and killed", pid)
	}
	wantText(t, h.call(t.Context(), t, "mcp__hung__echo", `{"message":"fresh"}`, nil), "Echo: fresh")
	if st := h.status(t, "hung"); !strings.Contains(st.LastError, "health check failed twice") {
		t.Errorf("last error %q, want the missed health checks", st.LastError)
	}
}
