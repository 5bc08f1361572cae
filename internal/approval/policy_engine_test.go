package approval

import (
	"encoding/json"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"bad action", func(c *Config) { c.Rules = []Rule{{"maybe", "x", ""}} }, "not allow, ask or deny"},
		{"pattern on a name-only tool", func(c *Config) { c.Rules = []Rule{{Allow, "mcp__github__x", "foo"}} }, "no argument rules can match"},
		{"bad command pattern", func(c *Config) { c.Rules = []Rule{{Deny, "execute_command", `echo "x`}} }, "execute_command(echo \"x)"},
		{"compound command pattern", func(c *Config) { c.Rules = []Rule{{Deny, "execute_command", "a && b"}} }, "one simple command"},
		{"bad path glob", func(c *Config) { c.Rules = []Rule{{Allow, "write_file", "src/[x"}} }, "not a valid path glob"},
		{"bad tool glob", func(c *Config) { c.Rules = []Rule{{Allow, "mcp__[", ""}} }, "not a valid glob"},
		{"bad override risk", func(c *Config) { c.RiskOverrides = map[string]tool.Risk{"x": "extreme"} }, `"extreme" is not a risk level`},
		{"bad override name", func(c *Config) { c.RiskOverrides = map[string]tool.Risk{"[": tool.RiskLow} }, "risk_overrides"},
		{"bad policy risk", func(c *Config) { c.RiskPolicy = map[tool.Risk]Outcome{"huge": Ask} }, `"huge" is not a risk level`},
		{"bad policy outcome", func(c *Config) { c.RiskPolicy = map[tool.Risk]Outcome{tool.RiskLow: "maybe"} }, "low: \"maybe\""},
		{"bad immune glob", func(c *Config) { c.ImmunePaths = []string{"a/[b"} }, "immune_paths"},
		{"empty immune glob", func(c *Config) { c.ImmunePaths = []string{""} }, "immune_paths"},
		{"bad subject kind", func(c *Config) { c.Subjects = map[string]Subject{"x": {Kind: "url", Arg: "u"}} }, `kind "url"`},
		{"subject without arg", func(c *Config) { c.Subjects = map[string]Subject{"x": {Kind: SubjectPath}} }, "no argument name"},
		{"empty edit tool", func(c *Config) { c.EditTools = []string{""} }, "edit_tools"},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if _, err := NewEngine(cfg); err == nil {
			t.Errorf("%s: NewEngine accepted the config", c.name)
		}
	}
	// Every problem is reported at once.
	cfg := DefaultConfig()
	cfg.Rules = []Rule{{Allow, "mcp__x", "y"}}
	cfg.RiskOverrides = map[string]tool.Risk{"x": "bad"}
	if err := cfg.Validate(); err == nil || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("want two errors, got %v", err)
	}
}

func TestModeValid(t *testing.T) {
	t.Parallel()
	for _, m := range append(Modes(), "") {
		if !m.Valid() {
			t.Errorf("%q not valid", m)
		}
	}
	for _, m := range []Mode{"bypassPermissions", "Default", "plan"} {
		if m.Valid() {
			t.Errorf("%q valid", m)
		}
	}
}

func TestCheckNilTool(t *testing.T) {
	t.Parallel()
	d := testEngine(t, DefaultConfig()).Check(Request{Mode: ModeBypass})
	if d.Outcome != Deny {
		t.Fatalf("nil tool: %+v", d)
	}
}

func TestCheckArgumentEdgeCases(t *testing.T) {
	t.Parallel()
	e := testEngine(t, Config{Rules: mustRules(t, Allow, "execute_command", "write_file(src/**)")})
	cases := []struct {
		tool, args string
		mode       Mode
		want       Outcome
		immune     bool
	}{
		{"execute_command", `{}`, ModeDefault, Ask, true},
		{"execute_command", `{"command": 42}`, ModeBypass, Ask, true},
		{"execute_command", `not json`, ModeBypass, Ask, true},
		{"execute_command", `{"command": ""}`, ModeDefault, Allow, false},
		{"execute_command", `{"command": "ls", "cwd": "/"}`, ModeDefault, Allow, false},
		{"write_file", `{}`, ModeDefault, Ask, false},
		{"write_file", `{"path": 7}`, ModeAcceptEdits, Ask, false},
		{"write_file", `{"path": "src/a"}`, ModeDefault, Allow, false},
		{"write_file", `null`, ModeDefault, Ask, false},
		{"grep", `{}`, ModeExplore, Allow, false},
	}
	for _, c := range cases {
		d := e.Check(Request{Tool: toolFor(t, c.tool), Args: json.RawMessage(c.args), Mode: c.mode, Workdir: "/w"})
		if d.Outcome != c.want || d.Immune != c.immune {
			t.Errorf("%s %s %s: %s immune=%v (%s), want %s immune=%v", c.mode, c.tool, c.args, d.Outcome, d.Immune, d.Reason, c.want, c.immune)
		}
	}
}

func TestCheckWithoutWorkdir(t *testing.T) {
	t.Parallel()
	e := testEngine(t, DefaultConfig())
	cases := []struct {
		path string
		want Outcome
	}{
		{"src/a.go", Allow},
		{"./a/../b", Allow},
		{"../a", Ask},
		{"/abs/a", Ask},
	}
	for _, c := range cases {
		d := e.Check(Request{Tool: toolFor(t, "write_file"), Args: pathArgs1(c.path), Mode: ModeAcceptEdits})
		if d.Outcome != c.want {
			t.Errorf("%q: %s (%s), want %s", c.path, d.Outcome, d.Reason, c.want)
		}
	}
}

// The read-only fast path comes before the tool's own check.
func TestReadOnlyToolSkipsChecker(t *testing.T) {
	t.Parallel()
	ro := checkingTool{fakeTool{spec("ro_checker", tool.RiskMedium, true)}, Deny, "no"}
	d := testEngine(t, DefaultConfig()).Check(Request{Tool: ro, Args: json.RawMessage(`{}`)})
	if d.Outcome != Allow {
		t.Fatalf("%+v", d)
	}
}

// An empty Checker outcome passes the decision on to rules and the risk policy.
func TestCheckerPassesOn(t *testing.T) {
	t.Parallel()
	low := checkingTool{fakeTool{spec("low_checker", tool.RiskLow, false)}, "", ""}
	e := testEngine(t, Config{Rules: mustRules(t, Deny, "denied_checker")})
	if d := e.Check(Request{Tool: low, Args: json.RawMessage(`{}`)}); d.Outcome != Allow {
		t.Errorf("low risk, no opinion: %+v", d)
	}
	denied := checkingTool{fakeTool{spec("denied_checker", tool.RiskLow, false)}, Allow, "fine by me"}
	if d := e.Check(Request{Tool: denied, Args: json.RawMessage(`{}`)}); d.Outcome != Deny {
		t.Errorf("a deny rule beats the tool's allow: %+v", d)
	}
}

// Accepting the suggestions of an ask must let the same call through.
func TestAcceptingSuggestionsAllows(t *testing.T) {
	t.Parallel()
	e := testEngine(t, DefaultConfig())
	asked := 0
	for _, c := range readCommandCases(t) {
		req := Request{Tool: toolFor(t, "execute_command"), Args: commandArgs(c.command), Workdir: testWorkdir}
		d := e.Check(req)
		if d.Outcome != Ask || d.Immune {
			continue
		}
		if len(d.Suggestions) == 0 {
			// Only commands that set unsafe variables, lines whose every command
			// is read-only but which write through a compound redirection or
			// define functions, and lines that redirect outside the working
			// directory (no rule covers those; read from where the redirecting
			// command runs: cd / && echo x > etc/hosts) have nothing to suggest.
			a := AnalyzeCommand(c.command)
			if slices.ContainsFunc(a.writeSites, func(w pathSite) bool {
				return w.redirect && slices.ContainsFunc(append([]Dir{startDir}, w.dirs...), func(d Dir) bool {
					p := w.path
					if !path.IsAbs(p) {
						p = path.Join(d.Path, p)
					}
					return !newPathSubject(p, testWorkdir).inside
				})
			}) {
				continue
			}
			for _, sc := range a.Commands {
				if !sc.ReadOnly && !sc.unsafeEnv {
					t.Errorf("%q: ask without suggestions: %s", c.command, d.Reason)
				}
			}
			continue
		}
		asked++
		req.SessionRules = d.Suggestions
		if again := e.Check(req); again.Outcome != Allow {
			t.Errorf("%q: after accepting %v: %s %s", c.command, d.Suggestions, again.Outcome, again.Reason)
		}
	}
	for _, p := range []string{"src/a/b.go", "main.go", "/tmp/x/y", "../other/z"} {
		req := Request{Tool: toolFor(t, "write_file"), Args: pathArgs1(p), Workdir: testWorkdir}
		d := e.Check(req)
		req.SessionRules = d.Suggestions
		if again := e.Check(req); d.Outcome != Ask || again.Outcome != Allow {
			t.Errorf("write_file %q: %s then %s after %v", p, d.Outcome, again.Outcome, d.Suggestions)
		}
		asked++
	}
	if asked < 150 {
		t.Errorf("only %d asks with suggestions exercised", asked)
	}
}

func TestValidateRule(t *testing.T) {
	t.Parallel()
	e := testEngine(t, DefaultConfig())
	for _, r := range []Rule{{Allow, "execute_command", "git push:*"}, {Allow, "write_file", "src/**"}, {Allow, "mcp__x__y", ""}} {
		if err := e.ValidateRule(r); err != nil {
			t.Errorf("%v: %v", r, err)
		}
	}
	for _, r := range []Rule{{Allow, "mcp__x__y", "z"}, {Allow, "execute_command", "a; b"}, {"", "x", ""}, {Allow, "", ""}} {
		if err := e.ValidateRule(r); err == nil {
			t.Errorf("%#v accepted", r)
		}
	}
}

func TestDecisionRuleIsACopy(t *testing.T) {
	t.Parallel()
	e := testEngine(t, Config{Rules: mustRules(t, Deny, "execute_command(rm:*)")})
	req := Request{Tool: toolFor(t, "execute_command"), Args: commandArgs("rm x")}
	d := e.Check(req)
	if d.Rule == nil || d.Rule.String() != "execute_command(rm:*)" || d.Rule.Action != Deny {
		t.Fatalf("rule %v", d.Rule)
	}
	d.Rule.Pattern = "ls:*"
	if again := e.Check(req); again.Outcome != Deny {
		t.Fatalf("changing a decision's rule changed the engine: %+v", again)
	}
}

func TestCheckConcurrent(t *testing.T) {
	t.Parallel()
	e := testEngine(t, Config{Rules: mustRules(t, Allow, "execute_command(go test:*)", "write_file(src/**)")})
	reqs := []Request{
		{Tool: toolFor(t, "execute_command"), Args: commandArgs("go test ./... && git status | head"), Workdir: "/w"},
		{Tool: toolFor(t, "execute_command"), Args: commandArgs("rm -rf / && echo $(id)"), Workdir: "/w"},
		{Tool: toolFor(t, "write_file"), Args: pathArgs1("src/a.go"), Workdir: "/w", SessionRules: mustRules(t, Allow, "write_file(x/**)")},
	}
	want := make([]Decision, len(reqs))
	for i, r := range reqs {
		want[i] = e.Check(r)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				r := (g + i) % len(reqs)
				if d := e.Check(reqs[r]); d.Outcome != want[r].Outcome || d.Reason != want[r].Reason {
					t.Errorf("request %d: %s %q, want %s %q", r, d.Outcome, d.Reason, want[r].Outcome, want[r].Reason)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestReasonSaysWhereRiskComesFrom: an approver reads why a tool has its risk when
// the tool's source set it (an MCP server's destructiveHint, an API's DELETE) or an
// override did: "has high risk" alone did not say.
func TestReasonSaysWhereRiskComesFrom(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.RiskOverrides = map[string]tool.Risk{"mcp__pw__browser_*": tool.RiskMedium}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec tool.Spec
		want string
	}{
		{tool.Spec{Name: "mcp__fs__delete", Risk: tool.RiskHigh, RiskWhy: "MCP server fs marks it destructive"},
			"mcp__fs__delete has high risk (MCP server fs marks it destructive) and needs approval"},
		{tool.Spec{Name: "mcp__pw__browser_click", Risk: tool.RiskHigh, RiskWhy: "MCP server pw marks it destructive"},
			"mcp__pw__browser_click has medium risk (set by permissions.risk_overrides) and needs approval"},
		{tool.Spec{Name: "plain", Risk: tool.RiskMedium}, "plain has medium risk and needs approval"},
	} {
		d := e.Check(Request{Tool: fakeTool{c.spec}, Mode: ModeDefault, Args: json.RawMessage(`{}`)})
		if d.Outcome != Ask || d.Reason != c.want {
			t.Errorf("%s: %s %q, want ask %q", c.spec.Name, d.Outcome, d.Reason, c.want)
		}
	}
}
