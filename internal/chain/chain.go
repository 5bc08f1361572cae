package chain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	starjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// ToolName is the name of the chaining tool.
const ToolName = "tool_chain"

// maxOutputBytes bounds what print() collects.
const maxOutputBytes = 64 << 10

// previewBytes is how much of a stored artifact the script (and the model) sees inline.
const previewBytes = 512

// Tools returns tool_chain and artifact_read under p, storing artifacts in store.
func Tools(p Policy, store *Artifacts) ([]tool.Tool, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return []tool.Tool{&chainTool{policy: p, store: store}, readTool{store: store}}, nil
}

type chainTool struct {
	policy Policy
	store  *Artifacts
	heap   heapProbe // shared by the chains' memory guards
}

func (t *chainTool) Spec() tool.Spec {
	p := t.policy
	return tool.Spec{
		Name:  ToolName,
		Label: "Chain tool calls",
		Description: fmt.Sprintf(`Run a Starlark script (a small Python dialect) that calls this session's tools as functions, to chain several calls and pass data between them in one step.
Call a tool as name(arg=value, ...) with keyword arguments only, or call("name", ...) for any tool name. A call returns the tool's structured output (dicts, lists, numbers) when it has one, else its text.
If a tool call fails, the script stops with an error naming the tool and the error kind. To handle failures yourself, use try_call("name", arg=value) instead: it returns a struct with ok (bool), value, error (text), kind (not_found, invalid_args, denied, timeout, ...) and call_id, and never stops the script for a tool failure.
A result larger than %d bytes is not passed inline: you get {"artifact": "art_…", "bytes": N, "preview": "…"}; read it with artifact_read(ref, offset, limit).
Output: what the script print()s, and the value of a global named result if the script sets one (it must be JSON-encodable). json.encode and json.decode are available; there is no file, network or clock access except through tools.
The answer always holds call_trace: every tool call the script made, in order, with its call_id, argument digest, status and duration, even when the script failed midway. Read it before retrying, so that you do not repeat a call that already had an effect.
Each call is checked, approved and recorded like a direct call (calls the session may not make are refused; risky ones may wait for a person's approval, up to %s). Limits: %d tool calls, %s per call, %s in total, %d execution steps, %d MiB of memory kept (a range has at most %d elements). while loops, if/for at top level and global reassignment are allowed. tool_chain itself, hosted tools and tools that wait for an answer from outside cannot be called from a chain.`,
			p.MaxInlineResultBytes, p.ApprovalTimeout, p.MaxToolCalls, p.CallTimeout, p.TotalTimeout, p.MaxSteps,
			p.MaxMemoryBytes>>20, p.MaxMemoryBytes/bytesPerRangeElement),
		Parameters: json.RawMessage(`{"type":"object","properties":{"script":{"type":"string","minLength":1,` +
			`"description":"the Starlark script; tools are functions taking keyword arguments, e.g. r = read_file(path=\"a.txt\")"}},` +
			`"required":["script"],"additionalProperties":false}`),
		// The chain only waits on its nested calls, which serialize themselves; holding
		// the session's serial lock would deadlock them.
		Flags: tool.Flags{ConcurrencySafe: true, Invokes: true},
		Risk:  tool.RiskLow,
		// The script has its own total deadline; the call's is a little later, so the
		// answer with the call trace is written before the executor gives up.
		Timeout: p.TotalTimeout + 30*time.Second,
	}
}

// traceEntry is one tool call of a script, for call_trace.
type traceEntry struct {
	Seq        int            `json:"seq"`
	Tool       string         `json:"tool"`
	CallID     string         `json:"call_id,omitempty"`
	ArgsDigest string         `json:"args_digest"`
	Status     string         `json:"status"` // ok or error
	Kind       tool.ErrorKind `json:"kind,omitempty"`
	DurationMS int64          `json:"duration_ms"`
	Artifact   string         `json:"artifact,omitempty"`
}

// outcome is the structured content of a chain's result. The trace comes before the
// output and result: a result cut to the token budget keeps its head.
type outcome struct {
	Status     string          `json:"status"` // ok or error
	Error      *outcomeError   `json:"error,omitempty"`
	Calls      int             `json:"calls"`
	CallTrace  []traceEntry    `json:"call_trace"`
	Output     string          `json:"output"`
	Truncated  bool            `json:"output_truncated,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Steps      uint64          `json:"steps"`
	DurationMS int64           `json:"duration_ms"`
}

type outcomeError struct {
	Kind    tool.ErrorKind `json:"kind"`
	Message string         `json:"message"`
}

func (t *chainTool) Run(tc *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args struct {
		Script string `json:"script"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "arguments: %v", err)
	}
	if tc.Invoke == nil || tc.Session == nil {
		return nil, tool.Errorf(tool.KindUnavailable, "%s can run only within a session's executor", ToolName)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(tc.Context, t.deadline(tc.Context))
	defer cancel()
	r := &run{t: t, tc: tc, ctx: ctx, trace: []traceEntry{}}
	r.thread = &starlark.Thread{Name: ToolName, Print: r.print}
	guard := &memoryGuard{limit: t.policy.MaxMemoryBytes, probe: &t.heap, stop: func(msg string) {
		r.fail(tool.KindFailed, msg)
		r.thread.Cancel("too much memory")
	}}
	guard.install(r.thread, t.policy.MaxSteps, func(th *starlark.Thread) {
		r.fail(tool.KindFailed, fmt.Sprintf("the script exceeded %d execution steps (an endless loop?) and was stopped", t.policy.MaxSteps))
		th.Cancel("too many execution steps")
	})
	stop := context.AfterFunc(ctx, func() { r.thread.Cancel("the chain was stopped: " + r.ctxReason()) })
	defer stop()
	defer guard.start()()

	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{While: true, TopLevelControl: true, GlobalReassign: true, Set: true},
		r.thread, "script.star", args.Script, r.predeclared())
	out := outcome{Status: "ok", CallTrace: r.snapshot(), Steps: r.thread.ExecutionSteps()}
	out.Output, out.Truncated = r.output()
	out.Calls = len(out.CallTrace)
	if v, ok := globals["result"]; ok && v != nil {
		if b, encErr := encodeJSON(r.thread, v); encErr == nil {
			out.Result = b
		} else if err == nil {
			err = fmt.Errorf("the global result cannot be encoded as JSON: %v", encErr)
		}
	}
	if err != nil {
		out.Status = "error"
		out.Error = r.classify(err)
	}
	out.DurationMS = time.Since(start).Milliseconds()
	res, jerr := tool.JSONResult(out)
	if jerr != nil {
		return nil, jerr
	}
	if out.Error != nil {
		res.IsError, res.ErrorKind = true, out.Error.Kind
	}
	return res, nil
}

// deadline is the total timeout, shortened when the call's own deadline is sooner, so
// that the answer (with its trace) is written before that deadline passes.
func (t *chainTool) deadline(ctx context.Context) time.Duration {
	d := t.policy.TotalTimeout
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		margin := min(2*time.Second, left/10)
		d = min(d, left-margin)
	}
	return d
}

// run is one execution of a script.
type run struct {
	t      *chainTool
	tc     *tool.Context
	ctx    context.Context
	thread *starlark.Thread

	mu        sync.Mutex
	trace     []traceEntry
	out       strings.Builder
	truncated bool
	failure   *outcomeError // a limit that stopped the script
}

func (r *run) print(_ *starlark.Thread, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out.Len()+len(msg)+1 > maxOutputBytes {
		r.truncated = true
		return
	}
	r.out.WriteString(msg)
	r.out.WriteByte('\n')
}

func (r *run) output() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String(), r.truncated
}

func (r *run) snapshot() []traceEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]traceEntry{}, r.trace...)
}

// fail records the first limit that stopped the script.
func (r *run) fail(kind tool.ErrorKind, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failure == nil {
		r.failure = &outcomeError{Kind: kind, Message: msg}
	}
}

func (r *run) ctxReason() string {
	if errors.Is(r.ctx.Err(), context.DeadlineExceeded) && r.tc.Context.Err() == nil {
		return fmt.Sprintf("total timeout (%s) reached", r.t.policy.TotalTimeout)
	}
	if errors.Is(r.tc.Context.Err(), context.DeadlineExceeded) {
		return "the call's deadline passed"
	}
	return "cancelled"
}

// classify turns the script's error into the result's error.
func (r *run) classify(err error) *outcomeError {
	if r.ctx.Err() != nil {
		kind := tool.KindCancelled
		if errors.Is(r.ctx.Err(), context.DeadlineExceeded) {
			kind = tool.KindTimeout
		}
		return &outcomeError{Kind: kind, Message: "the script was stopped: " + r.ctxReason()}
	}
	r.mu.Lock()
	f := r.failure
	r.mu.Unlock()
	if f != nil {
		return f
	}
	var se syntax.Error
	if errors.As(err, &se) {
		return &outcomeError{Kind: tool.KindInvalidArgs, Message: "the script does not parse: " + err.Error()}
	}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		return &outcomeError{Kind: tool.KindFailed, Message: ee.Backtrace()}
	}
	// Resolve errors (undefined names, …) are problems of the script text.
	if strings.HasPrefix(err.Error(), "script.star:") {
		return &outcomeError{Kind: tool.KindInvalidArgs, Message: "the script is not valid: " + err.Error()}
	}
	return &outcomeError{Kind: tool.KindFailed, Message: err.Error()}
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reserved are Starlark keywords and reserved words: no function may be named so.
var reserved = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`and break continue def elif else for if in lambda load not or pass return while
		as assert async await class del except finally from global import is nonlocal raise try with yield`) {
		reserved[w] = true
	}
}

// predeclared holds the builtins and one function per tool of the session whose name
// is a valid identifier that shadows nothing.
func (r *run) predeclared() starlark.StringDict {
	d := r.builtins()
	if r.tc.Session.Tools == nil {
		return d
	}
	for _, name := range r.tc.Session.Tools.Names() {
		if !identifier.MatchString(name) || reserved[name] || starlark.Universe.Has(name) || d.Has(name) {
			continue
		}
		d[name] = starlark.NewBuiltin(name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			if len(args) > 0 {
				return nil, fmt.Errorf("%s: tools take keyword arguments only, e.g. %s(name=value)", name, name)
			}
			return r.call(name, kw, false)
		})
	}
	return d
}

// builtins are the functions every script has besides the session's tools.
func (r *run) builtins() starlark.StringDict {
	d := starlark.StringDict{
		"call": starlark.NewBuiltin("call", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return r.named(b, args, kw, false)
		}),
		"try_call": starlark.NewBuiltin("try_call", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return r.named(b, args, kw, true)
		}),
		"json":   starjson.Module,
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
	}
	if r.t.policy.MaxMemoryBytes > 0 {
		d["range"] = boundedRange(r.t.policy.MaxMemoryBytes / bytesPerRangeElement)
	}
	return d
}

// named serves call("tool", ...) and try_call("tool", ...).
func (r *run) named(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple, try bool) (starlark.Value, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("%s: want the tool name as the only positional argument, then keyword arguments", b.Name())
	}
	name, ok := starlark.AsString(args[0])
	if !ok {
		return nil, fmt.Errorf("%s: the tool name must be a string, not %s", b.Name(), args[0].Type())
	}
	return r.call(name, kw, try)
}

// call makes one tool call through the session's executor.
func (r *run) call(name string, kw []starlark.Tuple, try bool) (starlark.Value, error) {
	p := r.t.policy
	r.mu.Lock()
	n := len(r.trace)
	r.mu.Unlock()
	if n >= p.MaxToolCalls {
		msg := fmt.Sprintf("the script tried to make more than %d tool calls (chain max_tool_calls); %s was not called", p.MaxToolCalls, name)
		r.fail(tool.KindFailed, msg)
		return nil, errors.New(msg)
	}
	kwargs := starlark.NewDict(len(kw))
	for _, pair := range kw {
		if err := kwargs.SetKey(pair[0], pair[1]); err != nil {
			return nil, err
		}
	}
	argJSON, err := encodeJSON(r.thread, kwargs)
	if err != nil {
		return nil, fmt.Errorf("%s: arguments cannot be encoded as JSON: %v", name, err)
	}
	sum := sha256.Sum256(argJSON)
	entry := traceEntry{Seq: n + 1, Tool: name, ArgsDigest: "sha256:" + hex.EncodeToString(sum[:8])}
	start := time.Now()
	nr := r.tc.Invoke.Invoke(r.ctx, tool.NestedCall{
		Name: name, Args: argJSON, Timeout: p.CallTimeout,
		ApprovalTimeout: p.ApprovalTimeout, MaxRiskWithoutApproval: p.MaxRiskWithoutApproval,
	})
	entry.DurationMS = time.Since(start).Milliseconds()
	entry.CallID = nr.CallID
	res := nr.Result
	entry.Status = "ok"
	var value starlark.Value = starlark.None
	var convErr error
	if res.IsError {
		entry.Status, entry.Kind = "error", res.ErrorKind
	} else {
		value, entry.Artifact, convErr = r.value(res)
	}
	r.mu.Lock()
	r.trace = append(r.trace, entry)
	r.mu.Unlock()
	r.tc.Emit("info", fmt.Sprintf("#%d %s %s %s %dms\n", entry.Seq, name, entry.CallID, strings.TrimSpace(entry.Status+" "+string(entry.Kind)), entry.DurationMS))
	if convErr != nil {
		return nil, convErr
	}
	if !res.IsError {
		if try {
			return attempt(true, value, starlark.None, starlark.None, nr.CallID), nil
		}
		return value, nil
	}
	msg := truncateText(res.Text(), p.MaxInlineResultBytes)
	if try && r.ctx.Err() == nil {
		return attempt(false, starlark.None, starlark.String(msg), starlark.String(res.ErrorKind), nr.CallID), nil
	}
	return nil, fmt.Errorf("%s failed (%s, call %s): %s", name, res.ErrorKind, nr.CallID, msg)
}

func attempt(ok bool, value, errText, kind starlark.Value, callID string) starlark.Value {
	return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
		"ok": starlark.Bool(ok), "value": value, "error": errText, "kind": kind, "call_id": starlark.String(callID),
	})
}

// value converts a successful result for the script: its structured content when it
// has one, else its text; one too large to inline becomes an artifact reference.
func (r *run) value(res *tool.Result) (starlark.Value, string, error) {
	payload, structured := []byte(res.Structured), len(res.Structured) > 0
	if !structured {
		payload = []byte(res.Text())
	}
	if len(payload) > r.t.policy.MaxInlineResultBytes {
		ref, truncated, err := r.t.store.Put(r.tc.Session.ID, payload)
		if err != nil {
			return nil, "", fmt.Errorf("a result of %d bytes could not be stored as an artifact: %v", len(payload), err)
		}
		d := starlark.NewDict(5)
		_ = d.SetKey(starlark.String("artifact"), starlark.String(ref))
		_ = d.SetKey(starlark.String("bytes"), starlark.MakeInt(len(payload)))
		_ = d.SetKey(starlark.String("preview"), starlark.String(cutIncomplete(payload[:min(previewBytes, len(payload))])))
		_ = d.SetKey(starlark.String("json"), starlark.Bool(structured))
		_ = d.SetKey(starlark.String("truncated"), starlark.Bool(truncated))
		return d, ref, nil
	}
	if !structured {
		return starlark.String(payload), "", nil
	}
	v, err := starlark.Call(r.thread, starjson.Module.Members["decode"], starlark.Tuple{starlark.String(payload)}, nil)
	if err != nil {
		return starlark.String(res.Text()), "", nil
	}
	return v, "", nil
}

func encodeJSON(th *starlark.Thread, v starlark.Value) ([]byte, error) {
	out, err := starlark.Call(th, starjson.Module.Members["encode"], starlark.Tuple{v}, nil)
	if err != nil {
		return nil, err
	}
	s, _ := starlark.AsString(out)
	return []byte(s), nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return string(cutIncomplete([]byte(s[:n]))) + "…"
}
