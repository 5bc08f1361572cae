package chain_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/leakcheck"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func TestMain(m *testing.M) {
	// Taken before the tests: taken after, it would ignore every goroutine they left.
	before := goleak.IgnoreCurrent()
	code := m.Run()
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := leakcheck.Find(before); err != nil {
			os.Stderr.WriteString("goroutine leak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

type fn struct {
	spec tool.Spec
	run  func(ctx *tool.Context, args json.RawMessage) (*tool.Result, error)
}

func (f fn) Spec() tool.Spec { return f.spec }
func (f fn) Run(ctx *tool.Context, args json.RawMessage) (*tool.Result, error) {
	return f.run(ctx, args)
}

// env is a daemon with the test tools registered.
type env struct {
	t     *testing.T
	d     *testdaemon.Daemon
	url   string
	risky atomic.Int32 // calls of t_risky that ran
}

const textSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`

func bigText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %05d\n", i)
	}
	return b.String()[:n]
}

func start(t *testing.T, mutate func(*config.Config)) *env {
	t.Helper()
	d := testdaemon.Start(t, func(c *config.Config) {
		c.Permissions.Allow = []string{"t_risky"}
		c.Permissions.Deny = []string{"t_denied"}
		c.Chain.MaxToolCalls = 5
		c.Chain.CallTimeout = 2 * time.Second
		c.Chain.TotalTimeout = 2 * time.Minute
		c.Chain.MaxInlineResultBytes = 300
		c.Chain.MaxSteps = 200_000
		c.Chain.ApprovalTimeout = 2 * time.Minute
		if mutate != nil {
			mutate(c)
		}
	})
	e := &env{t: t, d: d, url: d.URL}
	safe := tool.Flags{ReadOnly: true, ConcurrencySafe: true}
	text := func(raw json.RawMessage) string {
		var a struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &a)
		return a.Text
	}
	err := d.App.Tools.Register(
		fn{tool.Spec{Name: "t_echo", Description: "echo as JSON", Parameters: json.RawMessage(textSchema), Flags: safe, Risk: tool.RiskSafe},
			func(_ *tool.Context, raw json.RawMessage) (*tool.Result, error) {
				s := text(raw)
				return tool.JSONResult(map[string]any{"text": s, "n": len(s)})
			}},
		fn{tool.Spec{Name: "t_upper", Description: "upper-case text", Parameters: json.RawMessage(textSchema), Flags: safe, Risk: tool.RiskSafe},
			func(_ *tool.Context, raw json.RawMessage) (*tool.Result, error) {
				return tool.TextResult(strings.ToUpper(text(raw))), nil
			}},
		fn{tool.Spec{Name: "t_sleep", Description: "waits until cancelled", Flags: safe, Risk: tool.RiskSafe},
			func(ctx *tool.Context, _ json.RawMessage) (*tool.Result, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}},
		fn{tool.Spec{Name: "t_big", Description: "n bytes of text", Flags: safe, Risk: tool.RiskSafe,
			Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
			func(_ *tool.Context, raw json.RawMessage) (*tool.Result, error) {
				var a struct{ N int }
				_ = json.Unmarshal(raw, &a)
				return tool.TextResult(bigText(a.N)), nil
			}},
		fn{tool.Spec{Name: "t_risky", Description: "high risk, allowed by a rule", Risk: tool.RiskHigh},
			func(_ *tool.Context, _ json.RawMessage) (*tool.Result, error) {
				e.risky.Add(1)
				return tool.TextResult("did it"), nil
			}},
		fn{tool.Spec{Name: "t_denied", Description: "denied by a rule", Flags: safe, Risk: tool.RiskSafe},
			func(_ *tool.Context, _ json.RawMessage) (*tool.Result, error) {
				return tool.TextResult("must not run"), nil
			}},
		fn{tool.Spec{Name: "t_hosted", Description: "runs at the provider", Flags: tool.Flags{Hosted: true}, Risk: tool.RiskSafe},
			func(_ *tool.Context, _ json.RawMessage) (*tool.Result, error) {
				return tool.TextResult("must not run"), nil
			}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) do(method, path string, body any) (int, map[string]any) {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.url+path, r)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (e *env) session(tools ...string) string {
	e.t.Helper()
	code, out := e.do("POST", "/v1/sessions", map[string]any{"available_tools": tools})
	if code != http.StatusCreated {
		e.t.Fatalf("create session: %d %v", code, out)
	}
	return out["id"].(string)
}

// callResult is a call's message, as the model gets it.
type callResult struct {
	CallID    string
	IsError   bool
	Kind      string
	Out       chainOut
	Text      string
	Approvals []string // approval ids seen on the stream
}

type chainOut struct {
	Status string `json:"status"`
	Error  *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
	Output    string          `json:"output"`
	Result    json.RawMessage `json:"result"`
	Calls     int             `json:"calls"`
	Steps     uint64          `json:"steps"`
	CallTrace []struct {
		Seq        int    `json:"seq"`
		Tool       string `json:"tool"`
		CallID     string `json:"call_id"`
		ArgsDigest string `json:"args_digest"`
		Status     string `json:"status"`
		Kind       string `json:"kind"`
		Artifact   string `json:"artifact"`
	} `json:"call_trace"`
}

// call runs one call of a session and reads the stream to its end; onApproval is
// called with each approval id the stream announces.
func (e *env) call(sess, name string, args any, onApproval func(id string)) callResult {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"calls": []any{map[string]any{"id": "call_1", "name": name, "arguments": args}}})
	resp, err := http.Post(e.url+"/v1/sessions/"+sess+"/tool-calls", "application/json", bytes.NewReader(b))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("tool-calls: %d %s", resp.StatusCode, body)
	}
	var res callResult
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	done := false
	for sc.Scan() {
		var ev struct {
			Type     string `json:"type"`
			CallID   string `json:"call_id"`
			Approval struct {
				ID string `json:"id"`
			} `json:"approval"`
			Message struct {
				Content    string          `json:"content"`
				IsError    bool            `json:"is_error"`
				ErrorKind  string          `json:"error_kind"`
				Structured json.RawMessage `json:"structured"`
			} `json:"message"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			e.t.Fatalf("bad line %s: %v", sc.Bytes(), err)
		}
		switch ev.Type {
		case "approval_required":
			res.Approvals = append(res.Approvals, ev.Approval.ID)
			if onApproval != nil {
				onApproval(ev.Approval.ID)
			}
		case "message":
			if res.CallID != "" {
				e.t.Fatalf("a second message on the stream (nested results must not reach the model): %s", sc.Bytes())
			}
			res.CallID, res.IsError, res.Kind, res.Text = ev.CallID, ev.Message.IsError, ev.Message.ErrorKind, ev.Message.Content
			if name == "tool_chain" {
				if err := json.Unmarshal(ev.Message.Structured, &res.Out); err != nil {
					e.t.Fatalf("structured content: %v: %s", err, ev.Message.Structured)
				}
			}
		case "done":
			done = true
		}
	}
	if !done || res.CallID == "" {
		e.t.Fatalf("stream ended without message and done (err %v)", sc.Err())
	}
	return res
}

func (e *env) chain(sess, script string) callResult {
	e.t.Helper()
	return e.call(sess, "tool_chain", map[string]any{"script": script}, nil)
}

// record reads a call record.
func (e *env) record(id string) map[string]any {
	e.t.Helper()
	code, out := e.do("GET", "/v1/tool-calls/"+id, nil)
	if code != http.StatusOK {
		e.t.Fatalf("GET tool-call %s: %d %v", id, code, out)
	}
	return out
}

type step struct {
	tool, status, kind string
}

// checkTrace asserts the call trace step by step, and that every traced call has its
// own record, made by this chain, with the same outcome.
func (e *env) checkTrace(r callResult, want ...step) {
	e.t.Helper()
	tr := r.Out.CallTrace
	if len(tr) != len(want) || r.Out.Calls != len(want) {
		e.t.Fatalf("call_trace has %d entries (calls %d), want %d: %+v", len(tr), r.Out.Calls, len(want), tr)
	}
	for i, w := range want {
		got := tr[i]
		if got.Seq != i+1 || got.Tool != w.tool || got.Status != w.status || got.Kind != w.kind {
			e.t.Errorf("call_trace[%d] = %+v, want %+v", i, got, w)
		}
		if !strings.HasPrefix(got.ArgsDigest, "sha256:") || len(got.ArgsDigest) != len("sha256:")+16 {
			e.t.Errorf("call_trace[%d].args_digest = %q", i, got.ArgsDigest)
		}
		if !strings.HasPrefix(got.CallID, "tc_") {
			e.t.Errorf("call_trace[%d].call_id = %q", i, got.CallID)
			continue
		}
		rec := e.record(got.CallID)
		wantStatus := "succeeded"
		if w.status == "error" {
			wantStatus = "failed"
		}
		if rec["name"] != w.tool || rec["status"] != wantStatus || rec["tool_call_id"] != fmt.Sprintf("%s.%d", r.CallID, i+1) {
			e.t.Errorf("record of call_trace[%d]: name %v status %v tool_call_id %v; want %s %s %s.%d",
				i, rec["name"], rec["status"], rec["tool_call_id"], w.tool, wantStatus, r.CallID, i+1)
		}
	}
}

func wantError(t *testing.T, r callResult, kind, contains string) {
	t.Helper()
	if !r.IsError || r.Kind != kind || r.Out.Status != "error" || r.Out.Error == nil || r.Out.Error.Kind != kind {
		t.Fatalf("want an is_error %s result, got is_error=%v kind=%q out=%+v", kind, r.IsError, r.Kind, r.Out)
	}
	if !strings.Contains(r.Out.Error.Message, contains) {
		t.Errorf("error message %q does not mention %q", r.Out.Error.Message, contains)
	}
	// The model reads the text: the trace must be there too.
	if !strings.Contains(r.Text, `"call_trace"`) {
		t.Errorf("the result text lacks the call trace: %s", r.Text)
	}
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

func TestChain(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	all := e.session("tool_chain", "artifact_read", "t_*")

	t.Run("succeeds passing data between calls", func(t *testing.T) {
		r := e.chain(all, `
a = t_echo(text="hello")
b = t_upper(text=a["text"])
c = call("t_echo", text=b + "!")
print(b, a["n"])
result = {"a": a, "b": b, "c": c["n"]}
`)
		if r.IsError || r.Out.Status != "ok" {
			t.Fatalf("chain failed: %s", r.Text)
		}
		if r.Out.Output != "HELLO 5\n" {
			t.Errorf("output = %q", r.Out.Output)
		}
		var got map[string]any
		_ = json.Unmarshal(r.Out.Result, &got)
		if fmt.Sprint(got) != "map[a:map[n:5 text:hello] b:HELLO c:6]" {
			t.Errorf("result = %s", r.Out.Result)
		}
		e.checkTrace(r, step{"t_echo", "ok", ""}, step{"t_upper", "ok", ""}, step{"t_echo", "ok", ""})
		if d := r.Out.CallTrace[0].ArgsDigest; d != digest(`{"text":"hello"}`) {
			t.Errorf("args digest %s, want %s", d, digest(`{"text":"hello"}`))
		}
	})

	t.Run("syntax error", func(t *testing.T) {
		r := e.chain(all, "def (:\n")
		wantError(t, r, "invalid_args", "does not parse")
		e.checkTrace(r)
	})

	t.Run("runtime error midway keeps the trace", func(t *testing.T) {
		r := e.chain(all, "t_echo(text=\"a\")\nx = 1 // 0\nt_echo(text=\"b\")\n")
		wantError(t, r, "failed", "division by zero")
		e.checkTrace(r, step{"t_echo", "ok", ""})
	})

	t.Run("max tool calls", func(t *testing.T) {
		r := e.chain(all, "for i in range(10):\n    t_echo(text=str(i))\n")
		wantError(t, r, "failed", "more than 5 tool calls")
		e.checkTrace(r, step{"t_echo", "ok", ""}, step{"t_echo", "ok", ""}, step{"t_echo", "ok", ""}, step{"t_echo", "ok", ""}, step{"t_echo", "ok", ""})
	})

	t.Run("per-call timeout", func(t *testing.T) {
		r := e.chain(all, `
r = try_call("t_sleep")
result = {"ok": r.ok, "kind": r.kind, "id": r.call_id}
t_sleep()
`)
		wantError(t, r, "failed", "t_sleep failed (timeout")
		e.checkTrace(r, step{"t_sleep", "error", "timeout"}, step{"t_sleep", "error", "timeout"})
		var got map[string]any
		_ = json.Unmarshal(r.Out.Result, &got)
		if got["ok"] != false || got["kind"] != "timeout" || got["id"] != r.Out.CallTrace[0].CallID {
			t.Errorf("try_call result = %s", r.Out.Result)
		}
	})

	t.Run("endless loop hits the step limit", func(t *testing.T) {
		r := e.chain(all, "t_echo(text=\"x\")\nwhile True:\n    pass\n")
		wantError(t, r, "failed", "execution steps")
		e.checkTrace(r, step{"t_echo", "ok", ""})
	})

	t.Run("large result becomes an artifact", func(t *testing.T) {
		r := e.chain(all, "b = t_big(n=5000)\nresult = b\n")
		if r.IsError {
			t.Fatalf("chain failed: %s", r.Text)
		}
		e.checkTrace(r, step{"t_big", "ok", ""})
		var art struct {
			Artifact string `json:"artifact"`
			Bytes    int    `json:"bytes"`
			Preview  string `json:"preview"`
		}
		_ = json.Unmarshal(r.Out.Result, &art)
		want := bigText(5000)
		if art.Bytes != 5000 || !strings.HasPrefix(art.Artifact, "art_") || art.Preview != want[:512] || r.Out.CallTrace[0].Artifact != art.Artifact {
			t.Fatalf("artifact value = %s (trace %+v)", r.Out.Result, r.Out.CallTrace[0])
		}
		// The model reads it in pages with artifact_read.
		var got strings.Builder
		offset := 0
		for pages := 0; ; pages++ {
			if pages > 3 {
				t.Fatal("artifact_read does not reach the end")
			}
			// The limit as some models write integers (JSON Schema's integer all the same).
			rr := e.call(all, "artifact_read", map[string]any{"ref": art.Artifact, "offset": offset, "limit": json.Number("4096.0")}, nil)
			var page struct {
				Text       string `json:"text"`
				Total      int    `json:"total_bytes"`
				NextOffset *int   `json:"next_offset"`
			}
			if rr.IsError || json.Unmarshal([]byte(rr.Text), &page) != nil || page.Total != 5000 {
				t.Fatalf("artifact_read: %s", rr.Text)
			}
			got.WriteString(page.Text)
			if page.NextOffset == nil {
				break
			}
			offset = *page.NextOffset
		}
		if got.String() != want {
			t.Errorf("artifact content differs from the result (%d bytes read)", got.Len())
		}
		// Another session cannot read it.
		other := e.session("artifact_read")
		rr := e.call(other, "artifact_read", map[string]any{"ref": art.Artifact}, nil)
		if !rr.IsError || rr.Kind != "not_found" {
			t.Errorf("another session read the artifact: %v %s", rr.Kind, rr.Text)
		}
	})

	t.Run("denied by a rule", func(t *testing.T) {
		r := e.chain(all, "t_echo(text=\"before\")\nt_denied()\n")
		wantError(t, r, "failed", "t_denied failed (denied")
		e.checkTrace(r, step{"t_echo", "ok", ""}, step{"t_denied", "error", "denied"})
	})

	t.Run("tool outside the whitelist", func(t *testing.T) {
		narrow := e.session("tool_chain", "t_echo")
		r := e.chain(narrow, `
r = try_call("t_upper", text="x")
result = [r.ok, r.kind]
`)
		if r.IsError || string(r.Out.Result) != `[false,"not_found"]` {
			t.Fatalf("result %s (%s)", r.Out.Result, r.Text)
		}
		e.checkTrace(r, step{"t_upper", "error", "not_found"})
		// A tool outside the whitelist is no function in the script either.
		r = e.chain(narrow, "t_upper(text=\"x\")\n")
		wantError(t, r, "invalid_args", "undefined: t_upper")
		e.checkTrace(r)
	})

	t.Run("no recursion and no hosted tools", func(t *testing.T) {
		r := e.chain(all, `
a = try_call("tool_chain", script="print(1)")
b = try_call("t_hosted")
result = [a.kind, b.kind]
tool_chain(script="print(2)")
`)
		wantError(t, r, "failed", "calls other tools itself")
		if string(r.Out.Result) != `["denied","denied"]` {
			t.Errorf("result %s", r.Out.Result)
		}
		e.checkTrace(r, step{"tool_chain", "error", "denied"}, step{"t_hosted", "error", "denied"}, step{"tool_chain", "error", "denied"})
	})

	t.Run("invalid arguments reach the script", func(t *testing.T) {
		r := e.chain(all, "r = try_call(\"t_echo\", txt=\"x\")\nresult = r.kind\n")
		if r.IsError || string(r.Out.Result) != `"invalid_args"` {
			t.Fatalf("result %s (%s)", r.Out.Result, r.Text)
		}
		e.checkTrace(r, step{"t_echo", "error", "invalid_args"})
	})
}

func TestChainWaitsForApproval(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	sess := e.session("tool_chain", "t_*")

	// A rule allows t_risky when the model calls it directly …
	if r := e.call(sess, "t_risky", map[string]any{}, nil); r.IsError || len(r.Approvals) != 0 || e.risky.Load() != 1 {
		t.Fatalf("direct call: %v %s approvals %v", r.Kind, r.Text, r.Approvals)
	}
	// … but its risk is above chain.max_risk_without_approval: in a chain it asks.
	r := e.call(sess, "tool_chain", map[string]any{"script": "r = t_risky()\nprint(r)\n"}, func(id string) {
		code, out := e.do("POST", "/v1/approvals/"+id+"/decision", map[string]any{"decision": "approve", "actor": "tester"})
		if code != http.StatusOK {
			t.Errorf("decision: %d %v", code, out)
		}
	})
	if r.IsError || r.Out.Output != "did it\n" || len(r.Approvals) != 1 {
		t.Fatalf("chain: %s (approvals %v)", r.Text, r.Approvals)
	}
	if e.risky.Load() != 2 {
		t.Errorf("t_risky ran %d times, want 2", e.risky.Load())
	}
	e.checkTrace(r, step{"t_risky", "ok", ""})
	code, apr := e.do("GET", "/v1/approvals/"+r.Approvals[0], nil)
	if code != http.StatusOK || apr["call_id"] != r.Out.CallTrace[0].CallID || apr["status"] != "approved" {
		t.Errorf("approval: %d %v", code, apr)
	}
}

func TestChainApprovalTimesOut(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *config.Config) { c.Chain.ApprovalTimeout = time.Second })
	sess := e.session("tool_chain", "t_*")
	r := e.chain(sess, `
r = try_call("t_risky")
result = {"ok": r.ok, "kind": r.kind, "error": r.error}
t_echo(text="after")
`)
	if r.IsError || len(r.Approvals) != 1 {
		t.Fatalf("chain: %s (approvals %v)", r.Text, r.Approvals)
	}
	var got map[string]any
	_ = json.Unmarshal(r.Out.Result, &got)
	if got["ok"] != false || got["kind"] != "denied" || !strings.Contains(fmt.Sprint(got["error"]), "expired") {
		t.Errorf("result %s", r.Out.Result)
	}
	e.checkTrace(r, step{"t_risky", "error", "denied"}, step{"t_echo", "ok", ""})
	if e.risky.Load() != 0 {
		t.Errorf("t_risky ran %d times", e.risky.Load())
	}
	// A decision after the chain gave up is refused: the call can never run late.
	code, out := e.do("POST", "/v1/approvals/"+r.Approvals[0]+"/decision", map[string]any{"decision": "approve", "actor": "late"})
	if code == http.StatusOK {
		t.Errorf("a late approval was accepted: %v", out)
	}
	if _, apr := e.do("GET", "/v1/approvals/"+r.Approvals[0], nil); apr["status"] != "expired" {
		t.Errorf("approval status %v, want expired", apr["status"])
	}
}

func TestChainTotalTimeout(t *testing.T) {
	t.Parallel()
	// The total timeout counts the worker's start (a race-built binary, on a loaded
	// CI machine): 2 s once ran out before the first call was made.
	e := start(t, func(c *config.Config) {
		c.Chain.TotalTimeout = 6 * time.Second
		c.Chain.CallTimeout = time.Minute
	})
	sess := e.session("tool_chain", "t_*")
	r := e.chain(sess, "t_echo(text=\"first\")\nr = try_call(\"t_sleep\")\nt_echo(text=\"never\")\n")
	wantError(t, r, "timeout", "total timeout")
	e.checkTrace(r, step{"t_echo", "ok", ""}, step{"t_sleep", "error", "timeout"})

	// A chain that runs out of time while a call waits for approval withdraws the
	// request: nobody can approve, later, a call the model was told did not run.
	r = e.chain(sess, "t_echo(text=\"first\")\nt_risky()\n")
	wantError(t, r, "timeout", "total timeout")
	e.checkTrace(r, step{"t_echo", "ok", ""}, step{"t_risky", "error", "cancelled"})
	if len(r.Approvals) != 1 {
		t.Fatalf("approvals %v", r.Approvals)
	}
	if _, apr := e.do("GET", "/v1/approvals/"+r.Approvals[0], nil); apr["status"] != "denied" {
		t.Errorf("approval status %v, want denied", apr["status"])
	}
	// Its record says what the chain was told (and the call is counted so).
	if _, rec := e.do("GET", "/v1/tool-calls/"+r.Out.CallTrace[1].CallID, nil); rec["status"] != "failed" || rec["error_kind"] != "cancelled" {
		t.Errorf("record of the withdrawn call: %v, want failed, cancelled", rec)
	}
	if code, out := e.do("POST", "/v1/approvals/"+r.Approvals[0]+"/decision", map[string]any{"decision": "approve", "actor": "late"}); code == http.StatusOK {
		t.Errorf("a late approval was accepted: %v", out)
	}
	if e.risky.Load() != 0 {
		t.Errorf("t_risky ran %d times", e.risky.Load())
	}
}

// TestChainMemoryLimit: a script that keeps what it builds (Starlark counts steps, not
// bytes) is stopped once the heap has grown by chain.max_memory_bytes, and the daemon
// lives on.
func TestChainMemoryLimit(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *config.Config) { c.Chain.MaxMemoryBytes = 32 << 20 })
	sess := e.session("tool_chain", "t_*")
	// 40 strings of 4 MiB, all kept: 160 MiB.
	r := e.chain(sess, "t_echo(text=\"first\")\nkept = []\nfor i in range(40):\n    kept.append(\"a\" * (4 << 20) + str(i))\nt_echo(text=\"never\")\n")
	wantError(t, r, "failed", "memory")
	e.checkTrace(r, step{"t_echo", "ok", ""})
	// A script within the limit still runs.
	r = e.chain(sess, "t_echo(text=\"small\")\nresult = len(\"a\" * 1000)\n")
	if r.IsError {
		t.Fatalf("a small script failed: %+v", r.Out)
	}
}
