package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

type named struct {
	name, source string
}

func (n named) Spec() tool.Spec {
	return tool.Spec{Name: n.name, Description: n.source, Source: n.source}
}
func (n named) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	return tool.TextResult(n.source), nil
}

func managers(t *testing.T) (*toolmgr.Manager, *toolmgr.Manager) {
	hi, lo := toolmgr.New(), toolmgr.New()
	hi.MustRegister(named{"read_file", "builtin"}, named{"shared", "builtin"})
	lo.MustRegister(named{"shared", "mcp"}, named{"mcp__github__issues", "mcp"}, named{"mcp__github__prs", "mcp"}, named{"mcp__slack__post", "mcp"})
	return hi, lo
}

func TestToolProxy(t *testing.T) {
	t.Parallel()
	hi, lo := managers(t)
	cases := []struct {
		name      string
		whitelist []string
		want      string
		warnings  string
	}{
		{"nil allows all", nil, "mcp__github__issues mcp__github__prs mcp__slack__post read_file shared", ""},
		{"empty allows none", []string{}, "", ""},
		{"exact and pattern", []string{"read_file", "mcp__github__*"}, "mcp__github__issues mcp__github__prs read_file", ""},
		{"unknown dropped", []string{"read_file", "nope", " read_file "}, "read_file", "unknown tool: nope"},
		{"empty dropped", []string{"read_file", "", "  "}, "read_file", "empty tool name"},
		{"pattern matching nothing kept with warning", []string{"mcp__jira__*"}, "", "matches no tool yet: mcp__jira__*"},
		{"bad pattern", []string{"mcp__[x"}, "", "invalid tool pattern"},
		{"question mark", []string{"share?"}, "shared", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, w := NewToolProxy([]*toolmgr.Manager{hi, lo}, c.whitelist)
			if got := strings.Join(p.Names(), " "); got != c.want {
				t.Errorf("names = %q, want %q", got, c.want)
			}
			if got := strings.Join(w, "; "); c.warnings == "" && got != "" || !strings.Contains(got, c.warnings) {
				t.Errorf("warnings = %q, want %q", got, c.warnings)
			}
		})
	}

	// The first manager wins a name clash, in listing and resolution.
	p, _ := NewToolProxy([]*toolmgr.Manager{hi, lo}, []string{"shared"})
	if _, e, ok := p.Resolve("shared"); !ok || e.Spec.Source != "builtin" {
		t.Fatalf("resolve shared: %v %+v", ok, e)
	}
	if s := p.Specs(); len(s) != 1 || s[0].Source != "builtin" {
		t.Fatalf("specs: %+v", s)
	}
	// Outside the whitelist: never resolved, even though it exists.
	if _, _, ok := p.Resolve("read_file"); ok {
		t.Fatal("a tool outside the whitelist resolved")
	}
	// A pattern covers tools that appear later (an MCP server coming up).
	p, _ = NewToolProxy([]*toolmgr.Manager{hi, lo}, []string{"mcp__jira__*"})
	lo.MustRegister(named{"mcp__jira__create", "mcp"})
	if _, _, ok := p.Resolve("mcp__jira__create"); !ok {
		t.Fatal("pattern did not cover a tool registered later")
	}
}

type memStore struct{ m map[string]*store.Session }

func (s *memStore) CreateSession(_ context.Context, r *store.Session) error {
	s.m[r.ID] = r
	return nil
}
func (s *memStore) UpdateSessionSpec(_ context.Context, id string, prev, spec json.RawMessage, _ time.Time) error {
	r, ok := s.m[id]
	if !ok {
		return store.ErrNotFound
	}
	if !bytes.Equal(r.Spec, prev) {
		return store.ErrConflict
	}
	r.Spec = spec
	return nil
}
func (s *memStore) GetSession(_ context.Context, id string) (*store.Session, error) {
	if r, ok := s.m[id]; ok {
		return r, nil
	}
	return nil, store.ErrNotFound
}

func TestManagerWorkdirAndTenancy(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	allowed := filepath.Join(root, "checkouts")
	other := t.TempDir()
	hi, _ := managers(t)
	st := &memStore{m: map[string]*store.Session{}}
	m, err := NewManager(Config{WorkspaceDir: filepath.Join(root, "ws"), WorkdirRoots: []string{allowed}}, st, hi)
	if err != nil {
		t.Fatal(err)
	}
	if err := mkdirs(allowed+"/repo", other); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		workdir string
		ok      bool
	}{
		{"", true},
		{allowed + "/repo", true},
		{allowed + "/repo/../repo", true},
		{allowed + "/../ws", false},
		{other, false},
		{"relative", false},
		{allowed + "/missing", false},
		{"/etc\x00", false},
	}
	for _, c := range cases {
		s, _, err := m.Create(context.Background(), "t1", Spec{Workdir: c.workdir})
		if (err == nil) != c.ok {
			t.Errorf("workdir %q: err %v, want ok=%v", c.workdir, err, c.ok)
			continue
		}
		if err == nil && c.workdir == "" && !strings.HasPrefix(s.Info.Workdir, filepath.Join(root, "ws")) {
			t.Errorf("default workdir %s", s.Info.Workdir)
		}
	}
	s, _, err := m.Create(context.Background(), "t1", Spec{AvailableTools: []string{"read_file", "ghost"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(context.Background(), "t2", s.ID); err != ErrNotFound {
		t.Fatalf("another tenant saw the session: %v", err)
	}
	// A fresh manager (a restart) loads it from the store with the accepted whitelist.
	m2, _ := NewManager(Config{WorkspaceDir: filepath.Join(root, "ws")}, st, hi)
	s2, err := m2.Get(context.Background(), "t1", s.ID)
	if err != nil || fmt.Sprint(s2.Spec.AvailableTools) != "[read_file]" || s2.Spec.PermissionMode != "default" {
		t.Fatalf("reloaded: %+v %v", s2, err)
	}
}

// TestWhitelistKeepsToolsOfPendingSources: exact names and patterns of a source that
// is declared but not connected yet (an MCP server starting) are kept, with a warning
// that says so, and cover its tools once they are registered, in the session as
// created and as loaded again (a restart while the server still connects). Names no
// source claims are still dropped as unknown.
func TestWhitelistKeepsToolsOfPendingSources(t *testing.T) {
	t.Parallel()
	hi, lo := managers(t)
	pending := func(entry string, pattern bool) []string {
		if strings.HasPrefix(entry, "mcp__jira__") {
			return []string{"mcp server jira is connecting"}
		}
		return nil
	}
	st := &memStore{m: map[string]*store.Session{}}
	ws := filepath.Join(t.TempDir(), "ws")
	m, err := NewManager(Config{WorkspaceDir: ws}, st, hi, lo)
	if err != nil {
		t.Fatal(err)
	}
	m.UsePendingSources(pending)
	s, warnings, err := m.Create(context.Background(), "t1", Spec{AvailableTools: []string{
		"read_file", "mcp__jira__create", "mcp__jira__s*", "mcp__nope__x", "ghost"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(s.Spec.AvailableTools), "[read_file mcp__jira__create mcp__jira__s*]"; got != want {
		t.Errorf("whitelist = %s, want %s", got, want)
	}
	if got, want := strings.Join(warnings, "\n"), strings.Join([]string{
		"tool mcp__jira__create is not available yet: mcp server jira is connecting; it is kept and appears in the session when its source is up",
		"tool pattern matches no tool yet: mcp__jira__s* (mcp server jira is connecting)",
		"unknown tool: mcp__nope__x",
		"unknown tool: ghost",
	}, "\n"); got != want {
		t.Errorf("warnings:\n%s\nwant:\n%s", got, want)
	}
	// A call before the server connects is told why, as a call of its tools is while it is down.
	if got := s.pendingTool("mcp__jira__create"); got != "mcp server jira is connecting" {
		t.Errorf("pendingTool = %q", got)
	}
	if got := s.pendingTool("mcp__jira__other"); got != "" {
		t.Errorf("pendingTool of a name outside the whitelist = %q, want none", got)
	}

	// A restart while the server still connects: the stored whitelist loads whole.
	m2, _ := NewManager(Config{WorkspaceDir: ws}, st, hi, lo)
	m2.UsePendingSources(pending)
	s2, err := m2.Get(context.Background(), "t1", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	lo.MustRegister(named{"mcp__jira__create", "mcp"}, named{"mcp__jira__search", "mcp"}, named{"mcp__jira__delete", "mcp"})
	for _, sess := range []*Session{s, s2} {
		if got, want := strings.Join(sess.Tools.Names(), " "), "mcp__jira__create mcp__jira__search read_file"; got != want {
			t.Errorf("tools once jira connected = %q, want %q", got, want)
		}
	}
}

// TestWhitelistLooksAgainAfterPending: a source that connects between the lookup of a
// name and the question whether it is pending (it registers its tools first, then
// says it is connected) has the name: it is accepted, without a warning.
func TestWhitelistLooksAgainAfterPending(t *testing.T) {
	t.Parallel()
	hi, lo := managers(t)
	connects := func(entry string, _ bool) []string {
		lo.MustRegister(named{"mcp__jira__create", "mcp"})
		return nil
	}
	p, w := newToolProxy([]*toolmgr.Manager{hi, lo}, []string{"mcp__jira__create"}, connects, nil)
	if got := strings.Join(p.Names(), " "); got != "mcp__jira__create" || len(w) != 0 {
		t.Errorf("names %q, warnings %q; want the tool, no warning", got, w)
	}
}

// TestWorkdirMissingSaysSo: a workdir that does not exist was refused with Go's
// "lstat /x: no such file or directory"; the client is told it does not exist.
func TestWorkdirMissingSaysSo(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	hi, _ := managers(t)
	m, err := NewManager(Config{WorkspaceDir: filepath.Join(root, "ws"), WorkdirRoots: []string{root}}, &memStore{m: map[string]*store.Session{}}, hi)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(root, "checkout")
	_, _, err = m.Create(context.Background(), "t1", Spec{Workdir: missing})
	if err == nil || !strings.Contains(err.Error(), missing+" does not exist") || strings.Contains(err.Error(), "lstat") {
		t.Errorf("missing workdir: %v, want %q saying it does not exist", err, missing)
	}
}
