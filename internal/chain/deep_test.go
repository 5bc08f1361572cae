package chain_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestChainDeepToolResult: a tool whose structured output nests deeper than a chain
// takes values (1,000 levels) fails the script with a message saying so and naming the
// call, which ran (its trace entry is ok); 9,999 levels got past json.Valid and then
// failed encoding/json's 10,000 on the line to the worker, which was killed and said
// "the daemon closed the connection". A result 1,000 deep is the script's value.
func TestChainDeepToolResult(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *config.Config) { c.Chain.MaxInlineResultBytes = 1 << 20 })
	err := e.d.App.Tools.Register(fn{tool.Spec{Name: "t_deep", Description: "JSON n lists deep", Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true}, Risk: tool.RiskSafe,
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		func(_ *tool.Context, raw json.RawMessage) (*tool.Result, error) {
			var a struct{ N int }
			_ = json.Unmarshal(raw, &a)
			return &tool.Result{Structured: json.RawMessage(strings.Repeat("[", a.N) + strings.Repeat("]", a.N)),
				Content: []tool.Content{{Type: tool.ContentText, Text: "deep"}}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	sess := e.session("tool_chain", "t_*")
	for _, n := range []int{1001, 9999} {
		r := e.chain(sess, fmt.Sprintf("print(\"before\")\nr = try_call(\"t_deep\", n=%d)\nprint(\"after\")\n", n))
		wantError(t, r, "failed", "t_deep's result nests lists and dicts more than 1000 deep")
		if n < 9990 {
			e.checkTrace(r, step{"t_deep", "ok", ""})
		} else if tr := r.Out.CallTrace; len(tr) != 1 || tr[0].Tool != "t_deep" || tr[0].Status != "ok" {
			// (The call's record, 10,000 deep with its envelope, is more than this
			// test's JSON decoder reads.)
			t.Errorf("call_trace %+v", tr)
		}
		if r.Out.Output != "before\n" {
			t.Errorf("output %q", r.Out.Output)
		}
	}
	r := e.chain(sess, "x = t_deep(n=1000)\nd = 0\nfor i in range(2000):\n    if not x:\n        break\n    x = x[0]\n    d += 1\nresult = d\n")
	if r.IsError || string(r.Out.Result) != "999" {
		t.Fatalf("a result 1,000 deep: %+v %s", r.Out.Error, r.Out.Result)
	}
}
