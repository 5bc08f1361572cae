package toolmgr

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestJavaScriptPatterns: schemas written for JavaScript register and validate with
// their ECMA-262 patterns: zod's email check (lookaheads) and the backreference of
// Asana's published OpenAPI document, which Go's regexp refuses; a pattern whose
// matching would backtrack for ever is cut off and the value let through; a pattern
// no engine reads still refuses the tool.
func TestJavaScriptPatterns(t *testing.T) {
	t.Parallel()
	const zodEmail = `^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$`
	const asanaInclude = `([notes|assignee|subtasks|attachments|tags|followers|projects|dates|dependencies|parent])(,\\1)*`
	const backtracks = `^(?!b)(a+)+$`
	m := New()
	for name, pattern := range map[string]string{"email": zodEmail, "include": asanaInclude, "slow": backtracks} {
		m.MustRegister(&fnTool{
			spec: tool.Spec{Name: name, Parameters: json.RawMessage(`{"type":"object","properties":{"v":{"type":"string","pattern":"` + pattern + `"}}}`)},
			run:  func(_ *tool.Context, _ json.RawMessage) (*tool.Result, error) { return tool.TextResult("ran"), nil },
		})
	}
	for _, c := range []struct {
		tool, value string
		ok          bool
	}{
		{"email", "ada@example.com", true},
		{"email", "ada..b@example.com", false},
		{"email", ".ada@example.com", false},
		{"include", "tags", true},
		{"include", "zzz", false},
		{"slow", "aaaa", true},
		{"slow", strings.Repeat("a", 40) + "!", true}, // undecided in time: let through
	} {
		e, _ := m.Lookup(c.tool)
		args, _ := json.Marshal(map[string]string{"v": c.value})
		res := m.Run(e, Invocation{Ctx: newCtx(t), Args: args})
		if c.ok && (res.IsError || res.Text() != "ran") {
			t.Errorf("%s %q refused: %s", c.tool, c.value, res.Text())
		}
		if !c.ok && (!res.IsError || res.ErrorKind != tool.KindInvalidArgs || !strings.Contains(res.Text(), "/v:")) {
			t.Errorf("%s %q: got %v %s %q, want invalid_args at /v", c.tool, c.value, res.IsError, res.ErrorKind, res.Text())
		}
	}
	err := m.Register(&fnTool{spec: tool.Spec{Name: "broken", Parameters: json.RawMessage(`{"type":"object","properties":{"v":{"type":"string","pattern":"(a"}}}`)}})
	if err == nil || !strings.Contains(err.Error(), "does not compile") {
		t.Errorf("a pattern no engine reads: %v", err)
	}
}
