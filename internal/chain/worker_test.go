package chain_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/chain"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestChainHostileMemory: a single Starlark operation that asks the Go runtime for far
// more memory than the limit at once (no check between steps can stop it) ends the
// script with a failed result naming the memory limit, with its trace; the daemon (the
// test process) lives on and runs the next chain. In a memory cgroup, and without one
// (RLIMIT_AS).
func TestChainHostileMemory(t *testing.T) {
	t.Parallel()
	for _, bound := range []string{"cgroup", "rlimit"} {
		t.Run(bound, func(t *testing.T) {
			t.Parallel()
			e := start(t, nil) // the default limit, 256 MiB
			if bound == "rlimit" {
				withoutCgroups(t, e)
			} else if _, err := sandbox.MemoryCgroupParent(); err != nil {
				t.Skipf("no memory cgroup can be made here: %v", err)
			}
			sess := e.session("tool_chain", "t_*")
			for _, tc := range []struct{ name, script string }{
				// 1 TiB in one allocation: the runtime cannot map it and ends its process.
				{"replace", "s = 'a' * (1 << 20)\nt = s.replace('a', s)\n"},
				// 5 GiB grown by doubling, each allocation within what the host would map.
				{"join", "s = 'a' * (1 << 20)\nt = ''.join([s] * 5000)\n"},
				// 2^30 - 1 list slots (16 GiB), filled in one step.
				{"repeat", "x = [0] * ((1 << 30) - 1)\n"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					r := e.chain(sess, "t_echo(text=\"first\")\n"+tc.script+"t_echo(text=\"never\")\n")
					wantError(t, r, "failed", fmt.Sprintf("memory limit (%d MiB", 256))
					e.checkTrace(r, step{"t_echo", "ok", ""})
					// The daemon lives on.
					r = e.chain(sess, "result = t_echo(text=\"after\")[\"n\"]\n")
					if r.IsError || string(r.Out.Result) != "5" {
						t.Fatalf("the next chain: %+v %s", r.Out.Error, r.Out.Result)
					}
				})
			}
			noWorkersLeft(t)
		})
	}
}

func withoutCgroups(t *testing.T, e *env) {
	t.Helper()
	entry, ok := e.d.App.Tools.Lookup(chain.ToolName)
	if !ok {
		t.Fatal("no tool_chain")
	}
	chain.WithoutCgroups(entry.Tool)
}

// marker registers t_mark, which signals each call on the returned channel.
func marker(t *testing.T, e *env) <-chan struct{} {
	t.Helper()
	marks := make(chan struct{}, 8)
	err := e.d.App.Tools.Register(fn{tool.Spec{Name: "t_mark", Description: "marks", Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true}, Risk: tool.RiskSafe},
		func(_ *tool.Context, _ json.RawMessage) (*tool.Result, error) {
			marks <- struct{}{}
			return tool.TextResult("marked"), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return marks
}

// workerPIDs lists this process's children that are chain workers.
func workerPIDs(t *testing.T) []int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	var pids []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ..."
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self {
			continue
		}
		dir := filepath.Dir(p)
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		if arg0, _, _ := bytes.Cut(cmd, []byte{0}); string(arg0) == chain.WorkerArg0 {
			pid, _ := strconv.Atoi(filepath.Base(dir))
			pids = append(pids, pid)
		}
	}
	return pids
}

// noWorkersLeft checks that no worker process and no worker cgroup of this process is
// left (a worker answers before it exits: it may take a moment to go).
func noWorkersLeft(t *testing.T) {
	t.Helper()
	var pids []int
	var cgroups []string
	for range 500 {
		pids = workerPIDs(t)
		if parent, err := sandbox.MemoryCgroupParent(); err == nil {
			cgroups, _ = filepath.Glob(filepath.Join(parent, fmt.Sprintf("toolserverd-chain-%d-*", os.Getpid())))
		}
		if len(pids) == 0 && len(cgroups) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("left behind: worker processes %v, cgroups %v", pids, cgroups)
}

// TestChainWorkerKilled: a worker killed mid-script (SIGKILL from outside) makes a
// failed result with the calls made so far; the daemon lives on. Not parallel: it
// looks for its worker among the test process's children.
func TestChainWorkerKilled(t *testing.T) {
	e := start(t, func(c *config.Config) { c.Chain.MaxSteps = 1 << 40 })
	marks := marker(t, e)
	sess := e.session("tool_chain", "t_*")
	results := make(chan callResult, 1)
	go func() { results <- e.chain(sess, "t_mark()\nwhile True:\n    pass\n") }()
	<-marks
	pids := workerPIDs(t)
	if len(pids) != 1 {
		t.Fatalf("chain workers running: %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-results
	wantError(t, r, "failed", "the script's process ended unexpectedly (signal: killed)")
	e.checkTrace(r, step{"t_mark", "ok", ""})
	noWorkersLeft(t)
	if r = e.chain(sess, "result = t_echo(text=\"after\")[\"n\"]\n"); r.IsError || string(r.Out.Result) != "5" {
		t.Fatalf("the next chain: %+v %s", r.Out.Error, r.Out.Result)
	}
}

// TestChainCancelledEndsWorker: cancelling a chain (POST /v1/tool-calls/{id}/cancel)
// while a nested call is in flight cancels that call and ends the worker; so does
// cancelling one whose script computes.
func TestChainCancelledEndsWorker(t *testing.T) {
	e := start(t, func(c *config.Config) { c.Chain.MaxSteps = 1 << 40 })
	marks := marker(t, e)
	sess := e.session("tool_chain", "t_*")
	for _, tc := range []struct {
		name, script string
		trace        []step
	}{
		{"in a call", "t_mark()\nt_sleep()\n", []step{{"t_mark", "ok", ""}, {"t_sleep", "error", "cancelled"}}},
		{"computing", "t_mark()\nwhile True:\n    pass\n", []step{{"t_mark", "ok", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(map[string]any{"calls": []any{map[string]any{"id": "call_1", "name": "tool_chain", "arguments": map[string]any{"script": tc.script}}}})
			resp, err := http.Post(e.url+"/v1/sessions/"+sess+"/tool-calls", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 8<<20)
			var callID string
			for callID == "" && sc.Scan() {
				var ev struct {
					Type   string `json:"type"`
					Name   string `json:"name"`
					CallID string `json:"call_id"`
				}
				_ = json.Unmarshal(sc.Bytes(), &ev)
				if ev.Type == "tool_start" && ev.Name == "tool_chain" {
					callID = ev.CallID
				}
			}
			if callID == "" {
				t.Fatalf("no tool_start for the chain (%v)", sc.Err())
			}
			<-marks
			if len(workerPIDs(t)) != 1 {
				t.Fatalf("chain workers running: %v, want one", workerPIDs(t))
			}
			if code, out := e.do("POST", "/v1/tool-calls/"+callID+"/cancel", nil); code >= 300 {
				t.Fatalf("cancel: %d %v", code, out)
			}
			var r callResult
			for sc.Scan() {
				var ev struct {
					Type    string
					Message struct {
						Content    string          `json:"content"`
						IsError    bool            `json:"is_error"`
						ErrorKind  string          `json:"error_kind"`
						Structured json.RawMessage `json:"structured"`
					}
				}
				_ = json.Unmarshal(sc.Bytes(), &ev)
				if ev.Type == "message" {
					r.CallID, r.IsError, r.Kind, r.Text = callID, ev.Message.IsError, ev.Message.ErrorKind, ev.Message.Content
					if err := json.Unmarshal(ev.Message.Structured, &r.Out); err != nil {
						t.Fatalf("structured: %v %s", err, ev.Message.Structured)
					}
				}
			}
			wantError(t, r, "cancelled", "the script was stopped: cancelled")
			if len(r.Out.CallTrace) != len(tc.trace) {
				t.Fatalf("trace %+v, want %v", r.Out.CallTrace, tc.trace)
			}
			for i, w := range tc.trace {
				if got := r.Out.CallTrace[i]; got.Tool != w.tool || got.Status != w.status || got.Kind != w.kind {
					t.Errorf("call_trace[%d] = %+v, want %+v", i, got, w)
				}
			}
			noWorkersLeft(t)
		})
	}
}

// TestChainDeeplyNestedValues: a value nested deeper than a chain sends (255 lists or
// dicts), as a call's arguments or as the global result, is refused in the script like
// any value that cannot be encoded, with its output and steps, before the encoder
// recurses into it: 100,000 levels of Go recursion would end the worker (under the
// race detector and RLIMIT_AS, so did 10,000), and a value past encoding/json's 10,000
// on the line to the daemon would too.
func TestChainDeeplyNestedValues(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *config.Config) { c.Chain.MaxSteps = 2_000_000 })
	sess := e.session("tool_chain", "t_*")
	nest := func(n int) string { return fmt.Sprintf("x = []\nfor i in range(%d):\n    x = [x]\n", n) }
	for _, tc := range []struct{ name, script, want string }{
		{"arguments", "t_echo(text=\"first\")\nprint(\"before\")\n" + nest(100000) + "t_echo(text=x)\n",
			"t_echo: arguments cannot be encoded as JSON: json.encode: the value nests lists and dicts more than 255 deep"},
		{"arguments one past", "t_echo(text=\"first\")\nprint(\"before\")\n" + nest(252) + "t_echo(text={\"a\": (x,)})\n",
			"more than 255 deep"},
		{"result", "t_echo(text=\"first\")\nprint(\"before\")\n" + nest(100000) + "result = x\n",
			"the global result cannot be encoded as JSON: json.encode: the value nests lists and dicts more than 255 deep"},
		{"result one past", "t_echo(text=\"first\")\nprint(\"before\")\n" + nest(255) + "result = x\n",
			"more than 255 deep"},
		{"cycle", "t_echo(text=\"first\")\nprint(\"before\")\nx = [1]\ny = {\"x\": x}\nx.append(y)\nt_echo(text=x)\n",
			"cycle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.chain(sess, tc.script)
			wantError(t, r, "failed", tc.want)
			e.checkTrace(r, step{"t_echo", "ok", ""})
			if r.Out.Output != "before\n" || r.Out.Steps == 0 {
				t.Errorf("output %q, steps %d: want the script's print and its steps", r.Out.Output, r.Out.Steps)
			}
		})
	}
	// Arguments 255 deep (the keywords' dict, a dict, a tuple, 252 lists) reach the
	// tool, whose schema wants a string, and a result 255 deep is the script's result.
	r := e.chain(sess, nest(251)+"r = try_call(\"t_echo\", text={\"a\": (x,)})\nresult = {\"ok\": r.ok}\n")
	if r.IsError || string(r.Out.Result) != `{"ok":false}` {
		t.Fatalf("arguments 255 deep: %+v, result %s", r.Out.Error, r.Out.Result)
	}
	e.checkTrace(r, step{"t_echo", "error", "invalid_args"})
	r = e.chain(sess, nest(254)+"result = x\n")
	if r.IsError || !json.Valid(r.Out.Result) || len(r.Out.Result) != 2*255 {
		t.Fatalf("a result nested 255 deep: %+v, %d bytes", r.Out.Error, len(r.Out.Result))
	}
}
