package approval

import (
	"encoding/json"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// fakeTool is a tool with a fixed spec and, optionally, its own permission check.
type fakeTool struct {
	spec tool.Spec
}

func (f fakeTool) Spec() tool.Spec { return f.spec }
func (f fakeTool) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	panic("the approval engine must never run a tool")
}

// checkingTool answers CheckPermission with a fixed outcome.
type checkingTool struct {
	fakeTool
	outcome Outcome
	reason  string
}

func (c checkingTool) CheckPermission(json.RawMessage) (Outcome, string) { return c.outcome, c.reason }

func spec(name string, risk tool.Risk, readOnly bool) tool.Spec {
	return tool.Spec{Name: name, Risk: risk, Flags: tool.Flags{ReadOnly: readOnly}}
}

// specs are the tools the decision tables call, shaped like the built-ins.
var specs = map[string]tool.Spec{
	"execute_command":           spec("execute_command", tool.RiskHigh, false),
	"read_file":                 spec("read_file", tool.RiskSafe, true),
	"write_file":                spec("write_file", tool.RiskMedium, false),
	"edit_file":                 spec("edit_file", tool.RiskMedium, false),
	"multi_edit":                spec("multi_edit", tool.RiskMedium, false),
	"json_write":                spec("json_write", tool.RiskMedium, false),
	"json_read":                 spec("json_read", tool.RiskSafe, true),
	"list_dir":                  spec("list_dir", tool.RiskSafe, true),
	"glob":                      spec("glob", tool.RiskSafe, true),
	"grep":                      spec("grep", tool.RiskSafe, true),
	"web_fetch":                 spec("web_fetch", tool.RiskLow, true),
	"kill_job":                  spec("kill_job", tool.RiskLow, false),
	"safe_tool":                 spec("safe_tool", tool.RiskSafe, false),
	"medium_tool":               spec("medium_tool", tool.RiskMedium, false),
	"critical_tool":             spec("critical_tool", tool.RiskCritical, false),
	"unrated_tool":              spec("unrated_tool", "", false),
	"mcp__github__create_issue": spec("mcp__github__create_issue", tool.RiskMedium, false),
	"mcp__github__get_issue":    spec("mcp__github__get_issue", tool.RiskLow, true),
	"mcp__github__delete_repo":  spec("mcp__github__delete_repo", tool.RiskHigh, false),
	"mcp__slack__post":          spec("mcp__slack__post", tool.RiskMedium, false),
	"mcp__fs__write":            spec("mcp__fs__write", tool.RiskMedium, false),
}

// toolFor builds the tool a table names; checker_allow, checker_ask and
// checker_deny are medium-risk tools with their own check.
func toolFor(t testing.TB, name string) tool.Tool {
	t.Helper()
	switch name {
	case "checker_allow", "checker_ask", "checker_deny", "checker_pass":
		out := Outcome(name[len("checker_"):])
		if out == "pass" {
			out = ""
		}
		return checkingTool{fakeTool{spec(name, tool.RiskMedium, false)}, out, "the tool says " + string(out)}
	}
	s, ok := specs[name]
	if !ok {
		t.Fatalf("no spec for tool %q", name)
	}
	return fakeTool{spec: s}
}

func testEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func commandArgs(cmd string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return b
}

func pathArgs1(p string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"path": p})
	return b
}

func mustRules(t testing.TB, action Outcome, list ...string) []Rule {
	t.Helper()
	rules, err := ParseRules(action, list)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}
