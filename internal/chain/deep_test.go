package chain_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestChainDeepToolResult: a tool whose structured output nests deeper than a chain
// takes values (255 levels) fails the script with a message saying so and naming the
// call, which ran (its trace entry is ok). Output deeper than any structured output
// the daemon sends (256 levels) reaches the script as text with a note, as it reaches
// the model; 9,999 levels once got past json.Valid and then failed encoding/json's
// 10,000 on the line to the worker, which was killed. A result 255 deep is the
// script's value.
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
	r := e.chain(sess, "print(\"before\")\nr = try_call(\"t_deep\", n=256)\nprint(\"after\")\n")
	wantError(t, r, "failed", "t_deep's result nests lists and dicts more than 255 deep")
	e.checkTrace(r, step{"t_deep", "ok", ""})
	if r.Out.Output != "before\n" {
		t.Errorf("output %q", r.Out.Output)
	}
	for _, n := range []int{257, 9999} {
		r := e.chain(sess, fmt.Sprintf("result = t_deep(n=%d)\n", n))
		var text string
		if r.IsError || json.Unmarshal(r.Out.Result, &text) != nil || !strings.HasPrefix(text, "deep") || !strings.Contains(text, "more than 256 levels deep") {
			t.Fatalf("a result %d deep: %+v %s", n, r.Out.Error, r.Out.Result)
		}
		e.checkTrace(r, step{"t_deep", "ok", ""})
	}
	r = e.chain(sess, "x = t_deep(n=255)\nd = 0\nfor i in range(2000):\n    if not x:\n        break\n    x = x[0]\n    d += 1\nresult = d\n")
	if r.IsError || string(r.Out.Result) != "254" {
		t.Fatalf("a result 255 deep: %+v %s", r.Out.Error, r.Out.Result)
	}
}

// TestChainDeepJSONModule: the script's json.encode, json.encode_indent and
// json.decode refuse values and text nesting deeper than 255 levels, like values a
// chain sends: Starlark's encoder and decoder recurse once per level (what made CI's
// race-build worker run out of address space), and json.decode of 3,000,000 levels
// ended the worker, whose answer blamed a single operation's memory.
func TestChainDeepJSONModule(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *config.Config) { c.Chain.MaxSteps = 2_000_000 })
	sess := e.session("tool_chain", "t_*")
	nest := "x = []\nfor i in range(100000):\n    x = [x]\n"
	for _, tc := range []struct{ name, script, want string }{
		{"decode", "x = json.decode(\"[\" * 100000 + \"]\" * 100000)\n", "json.decode: the value nests lists and dicts more than 255 deep"},
		{"encode", nest + "s = json.encode(x)\n", "json.encode: the value nests lists and dicts more than 255 deep"},
		{"encode_indent", nest + "s = json.encode_indent(x)\n", "json.encode_indent: the value nests lists and dicts more than 255 deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.chain(sess, "t_echo(text=\"first\")\nprint(\"before\")\n"+tc.script)
			if tc.want == "" {
				// 900 kB of '<' is 900 kB on the line: it is sent, and the tool gets it.
				if r.IsError {
					t.Fatalf("%+v", r.Out.Error)
				}
				e.checkTrace(r, step{"t_echo", "ok", ""}, step{"t_echo", "ok", ""})
				return
			}
			wantError(t, r, "failed", tc.want)
			e.checkTrace(r, step{"t_echo", "ok", ""})
			if r.Out.Output != "before\n" {
				t.Errorf("output %q", r.Out.Output)
			}
		})
	}
	// Brackets within strings do not count; 255 levels decode and encode; bad JSON
	// is still bad JSON (default= applies to it).
	r := e.chain(sess, "x = json.decode('[' * 254 + '{\"a\": \"' + '[' * 5000 + '\"}' + ']' * 254)\n"+
		"n = len(json.encode(x)) + len(json.encode_indent(x))\n"+
		"d = 0\nfor i in range(2000):\n    if type(x) != \"list\":\n        break\n    x = x[0]\n    d += 1\n"+
		"result = [d, len(x[\"a\"]), json.decode('[[', default=7), n > 0]\n")
	if r.IsError || string(r.Out.Result) != "[254,5000,7,true]" {
		t.Fatalf("JSON 255 deep: %+v %s", r.Out.Error, r.Out.Result)
	}
}

// TestChainStackOverflow: what Starlark walks by recursion on a script's nesting
// (str() of a tuple nested a million deep, a 200,000-term expression compiled (500,000 without the race detector)) ends
// the worker when its Go stack passes the worker's bound; the answer says that the
// script nested too deep, not that one operation asked for too much memory (what it
// said in a cgroup for str(), and without one for both), and the daemon goes on.
func TestChainStackOverflow(t *testing.T) {
	t.Parallel()
	for _, bound := range []string{"cgroup", "rlimit"} {
		t.Run(bound, func(t *testing.T) {
			t.Parallel()
			e := start(t, func(c *config.Config) { c.Chain.MaxSteps = 10_000_000 })
			if bound == "rlimit" {
				withoutCgroups(t, e)
			} else if _, err := sandbox.MemoryCgroupParent(); err != nil {
				t.Skipf("no memory cgroup can be made here: %v", err)
			}
			sess := e.session("tool_chain", "t_*")
			// Terms enough for the compiler's recursion to pass the stack bound: its
			// frames are smaller without the race detector, and the parser's memory for
			// 500,000 terms under it passes the memory bound first.
			terms := 500_000
			if raceEnabled {
				terms = 200_000
			}
			for _, tc := range []struct {
				name, script string
				trace        []step
			}{
				{"str", "t_echo(text=\"first\")\nx = ()\nfor i in range(1000000):\n    x = (x,)\ns = str(x)\n", []step{{"t_echo", "ok", ""}}},
				{"compile", "t_echo(text=\"first\")\nx = " + strings.Repeat("1+", terms) + "1\n", nil},
			} {
				t.Run(tc.name, func(t *testing.T) {
					r := e.chain(sess, tc.script)
					wantError(t, r, "failed", "nests too deep")
					e.checkTrace(r, tc.trace...)
					if r = e.chain(sess, "result = t_echo(text=\"after\")[\"n\"]\n"); r.IsError || string(r.Out.Result) != "5" {
						t.Fatalf("the next chain: %+v %s", r.Out.Error, r.Out.Result)
					}
				})
			}
			noWorkersLeft(t)
		})
	}
}

// TestChainLongLine: a call's arguments or a result that encode to more than the
// daemon reads in one line from the worker (max_body_bytes, as a request: not
// chain.max_memory_bytes plus 1 MiB, which many chains at once would hold in the
// daemon's heap) fail in the script with a message saying so; the daemon killed the
// worker instead ("ended unexpectedly (signal: killed)"). A NUL is six bytes of JSON; a '<' was six on the
// line too (the worker's encoder escaped HTML in the arguments), and is one. Without a memory cgroup: in one, a race-detector build's worker can reach the
// kernel's bound of a 4 MiB limit (72 MiB) while encoding.
func TestChainLongLine(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *config.Config) {
		c.Chain.MaxMemoryBytes, c.Chain.CallTimeout, c.MaxBodyBytes = 4<<20, time.Minute, 256<<10
	})
	withoutCgroups(t, e)
	sess := e.session("tool_chain", "t_*")
	for _, tc := range []struct{ name, script, want string }{
		{"arguments", "t_echo(text=\"first\")\nprint(\"before\")\nt_echo(text=\"\\x00\" * 200000)\n",
			"t_echo: the arguments encode to 1200011 bytes of JSON, more than a chain may send to the daemon at once (262144 bytes, the daemon's max_body_bytes"},
		{"html", "t_echo(text=\"first\")\nprint(\"before\")\nt_echo(text=\"<\" * 200000)\n", ""},
		{"result", "t_echo(text=\"first\")\nprint(\"before\")\nresult = \"\\x00\" * 200000\n",
			"the global result encodes to 1200002 bytes of JSON, more than a chain may send to the daemon at once (262144 bytes, the daemon's max_body_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.chain(sess, tc.script)
			if tc.want == "" {
				// 200 kB of '<' is 200 kB on the line: it is sent, and the tool gets it.
				if r.IsError {
					t.Fatalf("%+v", r.Out.Error)
				}
				e.checkTrace(r, step{"t_echo", "ok", ""}, step{"t_echo", "ok", ""})
				return
			}
			wantError(t, r, "failed", tc.want)
			e.checkTrace(r, step{"t_echo", "ok", ""})
			if r.Out.Output != "before\n" {
				t.Errorf("output %q", r.Out.Output)
			}
		})
	}
}

// TestChainUndecodableToolResult: a tool's structured result that is valid JSON the
// script's decoder refuses (a number out of a float's range, which an MCP server may
// send) fails the script with a message naming the call, which ran; the script got the
// JSON text as a string instead, silently, and failed later on its use.
func TestChainUndecodableToolResult(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	err := e.d.App.Tools.Register(fn{tool.Spec{Name: "t_huge", Description: "a number JSON holds and a float does not", Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true}, Risk: tool.RiskSafe},
		func(_ *tool.Context, _ json.RawMessage) (*tool.Result, error) {
			return &tool.Result{Structured: json.RawMessage(`{"x": 1e400}`), Content: []tool.Content{{Type: tool.ContentText, Text: "huge"}}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	sess := e.session("tool_chain", "t_*")
	r := e.chain(sess, "print(\"before\")\nr = t_huge()\nprint(\"after\")\nresult = r[\"x\"]\n")
	wantError(t, r, "failed", "t_huge's result cannot be read by a script (json.decode: at offset ")
	if !strings.Contains(r.Out.Error.Message, "invalid number: 1e400); the call ran (tc_") {
		t.Errorf("message %q", r.Out.Error.Message)
	}
	e.checkTrace(r, step{"t_huge", "ok", ""})
	if r.Out.Output != "before\n" {
		t.Errorf("output %q", r.Out.Output)
	}

	// try_call does not stop the script: it says the call ran and its value is out of
	// reach, with the call's id.
	r = e.chain(sess, "a = try_call(\"t_huge\")\nresult = {\"ok\": a.ok, \"kind\": a.kind, \"error\": a.error, \"call_id\": a.call_id, \"value\": a.value}\n")
	if r.IsError {
		t.Fatalf("try_call stopped the script: %+v", r.Out.Error)
	}
	var got struct {
		OK     bool    `json:"ok"`
		Kind   string  `json:"kind"`
		Error  string  `json:"error"`
		CallID string  `json:"call_id"`
		Value  *string `json:"value"`
	}
	if err := json.Unmarshal(r.Out.Result, &got); err != nil {
		t.Fatalf("result %s: %v", r.Out.Result, err)
	}
	if got.OK || got.Kind != "failed" || got.Value != nil || !strings.HasPrefix(got.CallID, "tc_") ||
		!strings.Contains(got.Error, "t_huge's result cannot be read by a script") || !strings.Contains(got.Error, got.CallID) {
		t.Errorf("try_call gave %+v", got)
	}
}

// TestChainSharedValues: a value that holds the same list twice at each of 60 levels is
// 2^60 elements to encode; the depth walk before the encoder went through all of them
// in one step (never interrupted), holding the worker until the total timeout. It is
// refused at once, as sent and in the json module.
func TestChainSharedValues(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *config.Config) { c.Chain.TotalTimeout = 20 * time.Second })
	sess := e.session("tool_chain", "t_*")
	nest := "x = []\nfor i in range(60):\n    x = [x, x]\n"
	for _, tc := range []struct{ name, script, want string }{
		{"arguments", "t_echo(text=x)\n", "t_echo: arguments cannot be encoded as JSON: json.encode: the value holds more than 16777216 values"},
		{"result", "result = x\n", "the global result cannot be encoded as JSON: json.encode: the value holds more than 16777216 values"},
		{"json.encode", "s = json.encode(x)\n", "json.encode: the value holds more than 16777216 values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.chain(sess, "t_echo(text=\"first\")\nprint(\"before\")\n"+nest+tc.script)
			wantError(t, r, "failed", tc.want)
			e.checkTrace(r, step{"t_echo", "ok", ""})
		})
	}
}
