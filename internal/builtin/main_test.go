package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/toolserverd/toolserverd/internal/leakcheck"
	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// recorder is a tool.Progress that keeps everything emitted, per stream.
type recorder struct {
	mu      sync.Mutex
	streams map[string]*strings.Builder
	events  int
	closed  bool
	// onEmit, when set, is called after each Emit has been recorded.
	onEmit func()
}

func newRecorder() *recorder { return &recorder{streams: map[string]*strings.Builder{}} }

func (r *recorder) Emit(stream, text string) {
	r.mu.Lock()
	if r.streams[stream] == nil {
		r.streams[stream] = &strings.Builder{}
	}
	r.streams[stream].WriteString(text)
	r.events++
	r.mu.Unlock()
	if r.onEmit != nil {
		r.onEmit()
	}
}

func (r *recorder) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

func (r *recorder) text(stream string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.streams[stream]; b != nil {
		return b.String()
	}
	return ""
}

// env is one manager with its tools.
type env struct {
	m     *sandbox.Manager
	tools map[string]tool.Tool
}

func newEnv(t *testing.T, cfg sandbox.Config) *env {
	t.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 300 * time.Millisecond
	}
	m, err := sandbox.NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	e := &env{m: m, tools: map[string]tool.Tool{}}
	for _, tl := range CommandTools(m, nil) {
		e.tools[tl.Spec().Name] = tl
	}
	return e
}

func newSession(id, dir string) *tool.Session {
	return &tool.Session{ID: id, Workdir: dir, State: tool.NewState()}
}

// call runs a tool the way the dispatcher does: a returned error becomes an error
// result. The progress must not have been closed by the tool.
func (e *env) call(t *testing.T, ctx context.Context, sess *tool.Session, name string, args any) (*tool.Result, *recorder) {
	t.Helper()
	return e.callWith(t, ctx, sess, name, args, newRecorder())
}

// callWith is call with the recorder the call emits to.
func (e *env) callWith(t *testing.T, ctx context.Context, sess *tool.Session, name string, args any, rec *recorder) (*tool.Result, *recorder) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	tctx := &tool.Context{Context: ctx, CallID: "tc_test", ToolName: name, Session: sess, Progress: rec}
	res, err := e.tools[name].Run(tctx, raw)
	if err != nil {
		res = tool.FromError(err)
	}
	if res == nil {
		t.Fatalf("%s returned no result and no error", name)
	}
	if rec.closed {
		t.Errorf("%s closed the progress; that is the dispatcher's job", name)
	}
	return res, rec
}

func (e *env) mustCall(t *testing.T, sess *tool.Session, name string, args any) *tool.Result {
	t.Helper()
	res, _ := e.call(t, context.Background(), sess, name, args)
	if res.IsError {
		t.Fatalf("%s(%v): %s: %s", name, args, res.ErrorKind, res.Text())
	}
	return res
}

func decode[T any](t *testing.T, res *tool.Result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(res.Structured, &v); err != nil {
		t.Fatalf("structured %s: %v", res.Structured, err)
	}
	return v
}

type execOut struct {
	JobID      string `json:"job_id"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	DurationMS int64  `json:"duration_ms"`
	Truncated  bool   `json:"truncated"`
	Done       bool   `json:"done"`
}

type readOut struct {
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Size       int64  `json:"size"`
	EOF        bool   `json:"eof"`
	Status     string `json:"status"`
	Data       string `json:"data"`
	Replaced   bool   `json:"invalid_utf8_replaced"`
}

// checkArguments compiles a tool's parameters schema and checks that each of good
// validates against it and none of bad does.
func checkArguments(t *testing.T, name string, params json.RawMessage, good, bad []string) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		t.Fatalf("%s: parameters are not JSON: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "mem:///" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: schema does not compile: %v", name, err)
	}
	for i, args := range slices.Concat(good, bad) {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
		if err != nil {
			t.Fatalf("%s: %s is not JSON: %v", name, args, err)
		}
		want := i < len(good)
		if err := schema.Validate(v); (err == nil) != want {
			t.Errorf("%s: %s valid=%v, want %v (%v)", name, args, err == nil, want, err)
		}
	}
}
