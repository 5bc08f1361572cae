package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// fileEnv is a sandbox manager with the file tools and one session whose working
// directory is a fresh temporary directory.
type fileEnv struct {
	m     *sandbox.Manager
	tools map[string]tool.Tool
	dir   string
	sess  *tool.Session
}

func newFileEnv(t *testing.T) *fileEnv {
	t.Helper()
	return newFileEnvIn(t, t.TempDir(), sandbox.Config{})
}

// newFileEnvIn is newFileEnv with dir as the working directory and a sandbox manager
// made from cfg (a fresh state dir when it names none).
func newFileEnvIn(t *testing.T, dir string, cfg sandbox.Config) *fileEnv {
	t.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	m, err := sandbox.NewManager(cfg.WithDefaults())
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
	e := &fileEnv{m: m, tools: map[string]tool.Tool{}, dir: dir}
	for _, tl := range FileTools(m, Stamps{}) {
		e.tools[tl.Spec().Name] = tl
	}
	e.sess = e.newSession("s1")
	return e
}

func (e *fileEnv) newSession(id string) *tool.Session {
	return &tool.Session{ID: id, Workdir: e.dir, State: tool.NewState()}
}

// runIn calls a tool the way the dispatcher does (a returned error becomes an error
// result) in the given session.
func (e *fileEnv) runIn(t *testing.T, sess *tool.Session, name string, args any) *tool.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	tl, ok := e.tools[name]
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	tctx := &tool.Context{Context: context.Background(), CallID: "tc_x", ToolName: name, Session: sess, Progress: tool.NoProgress}
	res, err := tl.Run(tctx, raw)
	if err != nil {
		res = tool.FromError(err)
	}
	if res == nil {
		t.Fatalf("%s returned neither a result nor an error", name)
	}
	if res.IsError && res.ErrorKind == "" {
		t.Errorf("%s: an error result without a kind: %s", name, res.Text())
	}
	return res
}

func (e *fileEnv) run(t *testing.T, name string, args any) *tool.Result {
	t.Helper()
	return e.runIn(t, e.sess, name, args)
}

// ok runs a call that must succeed.
func (e *fileEnv) ok(t *testing.T, name string, args any) *tool.Result {
	t.Helper()
	res := e.run(t, name, args)
	if res.IsError {
		t.Fatalf("%s(%v): %s: %s", name, args, res.ErrorKind, res.Text())
	}
	return res
}

// fail runs a call that must fail with kind and a text containing every want.
func (e *fileEnv) fail(t *testing.T, name string, args any, kind tool.ErrorKind, want ...string) *tool.Result {
	t.Helper()
	res := e.run(t, name, args)
	if !res.IsError || res.ErrorKind != kind {
		t.Fatalf("%s(%v): is_error=%v kind=%q, want %q: %s", name, args, res.IsError, res.ErrorKind, kind, res.Text())
	}
	for _, w := range want {
		if !strings.Contains(res.Text(), w) {
			t.Errorf("%s(%v): text %q does not contain %q", name, args, res.Text(), w)
		}
	}
	return res
}

// put writes a file below the working directory, creating its parents.
func (e *fileEnv) put(t *testing.T, rel, content string) string {
	t.Helper()
	p := filepath.Join(e.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// disk returns the content of a file below the working directory ("<missing>" if none).
func (e *fileEnv) disk(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, rel))
	if os.IsNotExist(err) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (e *fileEnv) symlink(t *testing.T, target, rel string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(e.dir, rel)); err != nil {
		t.Fatal(err)
	}
}

// fileStructured decodes a result's structured content.
func fileStructured[T any](t *testing.T, res *tool.Result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(res.Structured, &v); err != nil {
		t.Fatalf("structured %s: %v", res.Structured, err)
	}
	return v
}

// fileContains fails unless s contains every want.
func fileContains(t *testing.T, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%q does not contain %q", s, w)
		}
	}
}
