package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// daemon is a real toolserverd (app.New, real store) serving on loopback.
type daemon struct {
	t       testing.TB
	app     *app.App
	url     string
	stop    func()
	tools   *testTools
	dataDir string
}

type daemonOpts struct {
	dataDir string
	store   string
	mutate  func(*config.Config)
	// errorLog, when set, receives the daemon's error-level log lines.
	errorLog io.Writer
	// infoLog, when set, receives its info-level and higher lines as JSON.
	infoLog io.Writer
	// log, when set, receives every log line of the daemon, as JSON.
	log io.Writer
}

func startDaemon(t testing.TB, o daemonOpts) *daemon {
	t.Helper()
	cfg := config.Defaults()
	cfg.Addr = "127.0.0.1:0"
	cfg.Auth.Unauthenticated = true
	cfg.DataDir = o.dataDir
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Store = o.store
	cfg.ReplicaID = "test"
	cfg.ShutdownTimeout = 5 * time.Second
	// SQLite syncs at checkpoints, not at every commit: what a commit's fsync buys (a
	// write kept through a power loss) no test here can see, in-process restarts keep
	// the page cache, and the fsyncs cost the package's tests seconds each on a loaded
	// disk (TestSkillPromptBudget's 1000 calls: 18 s with full, 12 s without). The
	// PostgreSQL the tests use runs with fsync=off likewise (pgtest); the store's own
	// tests cover synchronous=full (sqlite_sync_test.go).
	cfg.SQLite.Synchronous = "normal"
	// The operator trusts the test tools and commands; permission tests set their own.
	cfg.Permissions.Allow = []string{"echo", "sleep_*", "block", "block_read", "panics", "big", "whoami", "bg_sleep", "confirm", "task_*", "memory_*", "skill", "web_*", "write_file",
		"execute_command", "kill_job"}
	if o.mutate != nil {
		o.mutate(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.errorLog != nil {
		log = slog.New(slog.NewTextHandler(o.errorLog, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	if o.infoLog != nil {
		log = slog.New(slog.NewJSONHandler(o.infoLog, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if o.log != nil {
		log = slog.New(slog.NewJSONHandler(o.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("app.New: %v", err)
	}
	tt := registerTestTools(t, a.Tools)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	var once sync.Once
	d := &daemon{t: t, app: a, url: "http://" + ln.Addr().String(), tools: tt, dataDir: cfg.DataDir}
	d.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
			a.Close()
		})
	}
	t.Cleanup(d.stop)
	return d
}

// testTools are tools whose behaviour the tests control.
type testTools struct {
	release     chan struct{} // closes to let "block" return
	unsafeNow   atomic.Int32
	unsafeMax   atomic.Int32
	safeNow     atomic.Int32
	safeMax     atomic.Int32
	blockStarts chan string
}

type fn struct {
	spec tool.Spec
	run  func(ctx *tool.Context, args json.RawMessage) (*tool.Result, error)
}

func (f fn) Spec() tool.Spec { return f.spec }
func (f fn) Run(ctx *tool.Context, args json.RawMessage) (*tool.Result, error) {
	return f.run(ctx, args)
}

func track(now, peak *atomic.Int32) func() {
	n := now.Add(1)
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			break
		}
	}
	return func() { now.Add(-1) }
}

func registerTestTools(t testing.TB, m *toolmgr.Manager) *testTools {
	tt := &testTools{release: make(chan struct{}), blockStarts: make(chan string, 64)}
	type echoArgs struct {
		Text string `json:"text" jsonschema:"description=what to echo"`
	}
	echo, err := toolmgr.NewFunc(tool.Spec{Name: "echo", Description: "Echoes text.", Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true}, Risk: tool.RiskSafe,
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"echo":{"type":"string"}},"required":["echo"]}`)},
		func(_ *tool.Context, a echoArgs) (*tool.Result, error) {
			return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: a.Text}}, Structured: mustJSON(map[string]string{"echo": a.Text}), Details: mustJSON(map[string]int{"len": len(a.Text)})}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	type sleepArgs struct {
		MS int `json:"ms" jsonschema:"minimum=0,maximum=60000"`
	}
	sleeper := func(name string, safe bool) tool.Tool {
		ft, err := toolmgr.NewFunc(tool.Spec{Name: name, Description: "Sleeps.", Flags: tool.Flags{ConcurrencySafe: safe}},
			func(ctx *tool.Context, a sleepArgs) (*tool.Result, error) {
				if safe {
					defer track(&tt.safeNow, &tt.safeMax)()
				} else {
					defer track(&tt.unsafeNow, &tt.unsafeMax)()
				}
				select {
				case <-time.After(time.Duration(a.MS) * time.Millisecond):
					return tool.TextResult("slept"), nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			})
		if err != nil {
			t.Fatal(err)
		}
		return ft
	}
	block := func(ctx *tool.Context, _ json.RawMessage) (*tool.Result, error) {
		tt.blockStarts <- ctx.CallID
		select {
		case <-tt.release:
			return tool.TextResult("released"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.MustRegister(echo, sleeper("sleep_safe", true), sleeper("sleep_unsafe", false),
		fn{spec: tool.Spec{Name: "block", Description: "Waits until the test releases it or the call is cancelled.", Parameters: json.RawMessage(`{"type":"object"}`), Flags: tool.Flags{ConcurrencySafe: true}},
			run: block},
		fn{spec: tool.Spec{Name: "block_read", Description: "A read-only block.", Parameters: json.RawMessage(`{"type":"object"}`), Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true}},
			run: block},
		fn{spec: tool.Spec{Name: "panics", Description: "Panics.", Flags: tool.Flags{ConcurrencySafe: true}},
			run: func(*tool.Context, json.RawMessage) (*tool.Result, error) { panic("tool bug") }},
		fn{spec: tool.Spec{Name: "big", Description: "Returns a large text.", Flags: tool.Flags{ConcurrencySafe: true}},
			run: func(*tool.Context, json.RawMessage) (*tool.Result, error) {
				var b strings.Builder
				b.WriteString("FIRST-LINE\n")
				for i := 0; b.Len() < 400_000; i++ {
					b.WriteString("line of build output with some words in it, number ")
					b.WriteString(strings.Repeat("x", i%7))
					b.WriteByte('\n')
				}
				b.WriteString("LAST-LINE")
				return tool.TextResult(b.String()), nil
			}},
		fn{spec: tool.Spec{Name: "bg_sleep", Description: "Sleeps in the background.", Mode: tool.ModeBackground, Parameters: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer"}}}`)},
			run: func(ctx *tool.Context, args json.RawMessage) (*tool.Result, error) {
				var a struct{ MS int }
				_ = json.Unmarshal(args, &a)
				select {
				case <-time.After(time.Duration(a.MS) * time.Millisecond):
					return tool.TextResult("background work done"), nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}},
		fn{spec: tool.Spec{Name: "confirm", Description: "Asks the agent twice, then reports the answers.", Mode: tool.ModeStateful, Flags: tool.Flags{ConcurrencySafe: true}},
			run: func(ctx *tool.Context, _ json.RawMessage) (*tool.Result, error) {
				a1, err := ctx.Ask(tool.TextResult("proceed?"))
				if err != nil {
					return nil, err
				}
				a2, err := ctx.Ask(tool.TextResult("really?"))
				if err != nil {
					return nil, err
				}
				return tool.TextResult("answers: " + string(a1) + " " + string(a2)), nil
			}},
		fn{spec: tool.Spec{Name: "whoami", Description: "Reports the session it runs in and the arguments it got.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`), Flags: tool.Flags{ConcurrencySafe: true}},
			run: func(ctx *tool.Context, args json.RawMessage) (*tool.Result, error) {
				return tool.TextResult(ctx.Session.ID + " " + string(args)), nil
			}},
	)
	return tt
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// do sends a request and returns status, headers and body.
func (d *daemon) do(method, path string, body any) (int, http.Header, []byte) {
	d.t.Helper()
	return send(d.t, http.DefaultClient, method, d.url+path, nil, body)
}

// send sends a request with the headers h (and Content-Type: application/json when it
// has a body) through c, and returns status, headers and body.
func send(t testing.TB, c *http.Client, method, url string, h http.Header, body any) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		r = bytes.NewReader(mustJSON(b))
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

func (d *daemon) createSession(spec any) map[string]any {
	d.t.Helper()
	code, _, body := d.do("POST", "/v1/sessions", spec)
	if code != http.StatusCreated {
		d.t.Fatalf("create session: %d %s", code, body)
	}
	validate(d.t, "Session", body)
	var s map[string]any
	_ = json.Unmarshal(body, &s)
	return s
}

// event is one NDJSON line, kept raw and decoded.
type event struct {
	raw json.RawMessage
	m   map[string]any
}

func (e event) str(k string) string { s, _ := e.m[k].(string); return s }

// startBlocked posts a call of the block tool (id "b") in session sess and returns
// its daemon call id once it has started. Its stream stays open until ctx ends or the
// test releases the tool; the response is closed when the test ends.
func (d *daemon) startBlocked(ctx context.Context, sess string) string {
	d.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+"/v1/sessions/"+sess+"/tool-calls",
		strings.NewReader(`{"calls":[{"id":"b","name":"block","arguments":{}}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { resp.Body.Close() })
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil {
		d.t.Fatal(err)
	}
	var start struct {
		CallID string `json:"call_id"`
	}
	if err := json.Unmarshal(line, &start); err != nil || start.CallID == "" {
		d.t.Fatalf("first line of the blocked call: %s (%v)", line, err)
	}
	return start.CallID
}

// stream posts a batch and reads the whole NDJSON answer, validating each line.
func (d *daemon) stream(path string, body any) (int, []event) {
	d.t.Helper()
	code, hdr, out := d.do("POST", path, body)
	if code != http.StatusOK {
		return code, []event{{raw: out}}
	}
	if ct := hdr.Get("Content-Type"); ct != "application/x-ndjson" {
		d.t.Fatalf("Content-Type = %q", ct)
	}
	return code, parseNDJSON(d.t, out)
}

func parseNDJSON(t testing.TB, out []byte) []event {
	t.Helper()
	var evs []event
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		validate(t, "StreamEvent", line)
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("bad NDJSON line %q: %v", line, err)
		}
		evs = append(evs, event{raw: line, m: m})
	}
	return evs
}

// messages returns the message events by tool_call_id, checking the stream's shape:
// every call has one tool_start before its one message, and done comes last.
func messages(t *testing.T, evs []event) map[string]event {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].str("type") != "done" {
		t.Fatalf("stream does not end with done: %v", evs)
	}
	started := map[string]bool{}
	out := map[string]event{}
	for _, e := range evs[:len(evs)-1] {
		id := e.str("tool_call_id")
		switch e.str("type") {
		case "tool_start":
			if started[id] {
				t.Fatalf("two tool_start for %s", id)
			}
			started[id] = true
		case "message":
			if !started[id] {
				t.Fatalf("message for %s before its tool_start", id)
			}
			if _, dup := out[id]; dup {
				t.Fatalf("two messages for %s", id)
			}
			out[id] = e
		case "done":
			t.Fatal("done before the end")
		}
	}
	return out
}
