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
	"time"

	starjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"

	"github.com/toolserverd/toolserverd/internal/jsontext"
	"github.com/toolserverd/toolserverd/internal/sandbox"
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
	// workers knows where chains' worker processes get their memory cgroups.
	workers workers
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
		// Cancelled, a chain answers with its call trace once its worker has answered
		// or been killed (cancelGrace, then SIGKILL): on a loaded machine that can take
		// longer than the executor's default half second, and an answer without the
		// trace would leave the caller not knowing which calls ran.
		CancelGrace: 5 * time.Second,
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
	done, died := r.drive(args.Script)
	out := outcome{Status: "ok", CallTrace: r.trace, Calls: len(r.trace), Output: r.out.String(), Truncated: r.truncated}
	if done != nil {
		out.Steps, out.Result, out.Truncated = done.Steps, done.Result, out.Truncated || done.Truncated
	}
	switch {
	case done != nil && done.Error == nil:
	case r.ctx.Err() != nil:
		kind := tool.KindCancelled
		if errors.Is(r.ctx.Err(), context.DeadlineExceeded) {
			kind = tool.KindTimeout
		}
		out.Error = &outcomeError{Kind: kind, Message: "the script was stopped: " + r.ctxReason()}
	case done != nil:
		out.Error = done.Error
	default:
		out.Error = died
	}
	if out.Error != nil {
		out.Status = "error"
	}
	out.DurationMS = time.Since(start).Milliseconds()
	res, jerr := tool.JSONResult(out)
	if jerr != nil {
		return nil, jerr
	}
	if out.Error != nil {
		res.IsError, res.ErrorKind = true, out.Error.Kind
	}
	if u := use(r.exit, r.inheritedRSS); u != nil {
		res.Details, _ = json.Marshal(map[string]any{"worker": u})
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

// run is one execution of a script, the daemon's side: the script runs in a worker
// process (worker.go), which asks for each tool call; the calls, their trace and the
// artifacts stay here.
type run struct {
	t   *chainTool
	tc  *tool.Context
	ctx context.Context

	// Only the goroutine driving the worker uses these.
	trace     []traceEntry
	out       strings.Builder
	truncated bool
	exit      sandbox.BoundedExit // how the worker ended, once drive has returned
	// inheritedRSS is the daemon's peak RSS as the worker started (see use).
	inheritedRSS int64
}

func (r *run) print(msg string) {
	if r.out.Len()+len(msg)+1 > maxOutputBytes {
		r.truncated = true
		return
	}
	r.out.WriteString(msg)
	r.out.WriteByte('\n')
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

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reserved are Starlark keywords and reserved words: no function may be named so. It
// is made with the package's variables, before any init (the worker's runs a script).
var reserved = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`and break continue def elif else for if in lambda load not or pass return while
		as assert async await class del except finally from global import is nonlocal raise try with yield`) {
		m[w] = true
	}
	return m
}()

// call makes one tool call of the script through the session's executor; ctx ends
// with the chain or the worker.
func (r *run) call(ctx context.Context, req *callRequest) *callReply {
	p := r.t.policy
	n := len(r.trace)
	if n >= p.MaxToolCalls { // the worker stops the script first; this holds whatever it does
		return &callReply{Error: fmt.Sprintf("the script tried to make more than %d tool calls (chain max_tool_calls); %s was not called", p.MaxToolCalls, req.Tool)}
	}
	sum := sha256.Sum256(req.Args)
	entry := traceEntry{Seq: n + 1, Tool: req.Tool, ArgsDigest: "sha256:" + hex.EncodeToString(sum[:8])}
	start := time.Now()
	nr := r.tc.Invoke.Invoke(ctx, tool.NestedCall{
		Name: req.Tool, Args: req.Args, Timeout: p.CallTimeout,
		ApprovalTimeout: p.ApprovalTimeout, MaxRiskWithoutApproval: p.MaxRiskWithoutApproval,
	})
	entry.DurationMS = time.Since(start).Milliseconds()
	entry.CallID = nr.CallID
	res := nr.Result
	entry.Status = "ok"
	rep := &callReply{CallID: nr.CallID}
	if res.IsError {
		entry.Status, entry.Kind = "error", res.ErrorKind
		rep.Failed, rep.Kind, rep.Message = true, res.ErrorKind, truncateText(res.Text(), p.MaxInlineResultBytes)
		rep.Stopping = r.ctx.Err() != nil
	} else if ref, err := r.value(req.Tool, res, rep); err != nil {
		rep.Error = err.Error()
	} else {
		entry.Artifact = ref
	}
	r.trace = append(r.trace, entry)
	r.tc.Emit("info", fmt.Sprintf("#%d %s %s %s %dms\n", entry.Seq, req.Tool, entry.CallID, strings.TrimSpace(entry.Status+" "+string(entry.Kind)), entry.DurationMS))
	return rep
}

// value puts a successful result into rep: its structured content when it has one,
// else its text; one too large to inline is stored and becomes an artifact reference.
func (r *run) value(name string, res *tool.Result, rep *callReply) (artifact string, err error) {
	payload, structured := []byte(res.Structured), len(res.Structured) > 0
	if !structured {
		payload = []byte(res.Text())
	}
	if len(payload) > r.t.policy.MaxInlineResultBytes {
		ref, truncated, err := r.t.store.keep(r.tc, r.tc.Session, payload)
		if err != nil {
			return "", fmt.Errorf("a result of %d bytes could not be stored as an artifact: %v", len(payload), err)
		}
		rep.Artifact = &artifactRef{Ref: ref, Bytes: len(payload), JSON: structured, Truncated: truncated,
			Preview: string(cutIncomplete(payload[:min(previewBytes, len(payload))]))}
		return ref, nil
	}
	if structured && json.Valid(payload) {
		if jsontext.Deeper(payload, maxValueDepth) {
			// encoding/json refuses more than 10,000 levels on the line, and the
			// worker's decoder recurses once per level.
			return "", fmt.Errorf("%s's result nests lists and dicts more than %d deep, deeper than a chain takes values (the call ran: %s); call %s directly to see its result",
				name, maxValueDepth, rep.CallID, name)
		}
		rep.JSON = payload
	} else {
		rep.Text = res.Text()
	}
	return "", nil
}

// maxValueDepth is how deep a script's value sent to the daemon (a call's arguments,
// the global result) may nest lists, tuples, dicts and structs; so may what the
// script's json module encodes and decodes, and a tool's structured result the
// script gets. The chain's own structured output holds the result one level down, and
// no structured output nests deeper than tool.MaxStructuredDepth (clients' decoders
// stop short of 1,000 levels). It also keeps the worker's recursion shallow:
// Starlark's encoder and decoder recurse once per level.
const maxValueDepth = tool.MaxStructuredDepth - 1

// encodeJSON encodes a script's value for the line to the daemon. A value nested more
// than maxValueDepth deep, or holding more than maxValues values, is refused here, as one
// that cannot be encoded, before the encoder recurses into it.
func encodeJSON(th *starlark.Thread, v starlark.Value, maxValues int) ([]byte, error) {
	if err := checkDepth("json.encode", v, maxValueDepth, maxValues); err != nil {
		return nil, err
	}
	out, err := starlark.Call(th, starjson.Module.Members["encode"], starlark.Tuple{v}, nil)
	if err != nil {
		return nil, err
	}
	s, _ := starlark.AsString(out)
	return []byte(s), nil
}

// maxValues is how many values (lists, dicts, strings, numbers …) a value the script
// encodes may hold, counting one held in several places each time it is: a value it
// keeps holds at most one per list slot (16 bytes) of chain.max_memory_bytes, while a
// list holding the same list twice at each of 60 levels is 2^60 of them, a walk (and an
// encoding) that would never end, in one step that is never interrupted.
func maxValues(limit int64) int { return int(limit / 16) }

// checkDepth walks v without recursing and fails when it nests deeper than max, or
// holds more than maxValues values. A value that holds itself is left to the encoder,
// which names the cycle.
func checkDepth(fn string, v starlark.Value, max, maxValues int) error {
	type level struct {
		seq   starlark.Indexable // its elements, read in place (a list, tuple, range)
		items []starlark.Value   // or these, gathered (a dict's values, a set, a struct's fields)
		pos   int
		owner starlark.Value // a list, dict or set, for the cycle check; else nil
	}
	var stack []level
	values := 0
	push := func(v starlark.Value) (cycle bool, err error) {
		if values++; values > maxValues {
			return false, fmt.Errorf("%s: the value holds more than %d values (one held in several places counts each time), more than a chain encodes (chain.max_memory_bytes / 16)", fn, maxValues)
		}
		var seq starlark.Indexable
		var items []starlark.Value
		var owner starlark.Value
		switch x := v.(type) {
		case starlark.NoneType, starlark.Bool, starlark.Int, starlark.Float, starlark.String, starlark.Bytes:
			return false, nil
		case *starlark.List, *starlark.Dict, *starlark.Set:
			owner = x
		}
		switch x := v.(type) {
		case starlark.IterableMapping:
			for _, kv := range x.Items() {
				items = append(items, kv[1])
			}
		case starlark.Indexable:
			seq = x
		case starlark.Iterable:
			it := x.Iterate()
			var e starlark.Value
			for it.Next(&e) {
				items = append(items, e)
			}
			it.Done()
		case starlark.HasAttrs:
			for _, name := range x.AttrNames() {
				if a, err := x.Attr(name); err == nil && a != nil {
					items = append(items, a)
				}
			}
		default:
			return false, nil
		}
		if len(stack) == max {
			// A value that holds itself nests without end: its containers repeat on
			// the path.
			onPath := map[starlark.Value]bool{}
			for _, l := range append(stack, level{owner: owner}) {
				if l.owner != nil && onPath[l.owner] {
					return true, nil
				} else if l.owner != nil {
					onPath[l.owner] = true
				}
			}
			return false, fmt.Errorf("%s: the value nests lists and dicts more than %d deep", fn, max)
		}
		stack = append(stack, level{seq: seq, items: items, owner: owner})
		return false, nil
	}
	if cycle, err := push(v); cycle || err != nil {
		return err
	}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		var next starlark.Value
		switch {
		case top.seq != nil && top.pos < top.seq.Len():
			next = top.seq.Index(top.pos)
		case top.seq == nil && top.pos < len(top.items):
			next = top.items[top.pos]
		default:
			stack = stack[:len(stack)-1]
			continue
		}
		top.pos++
		if cycle, err := push(next); cycle || err != nil {
			return err
		}
	}
	return nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return string(cutIncomplete([]byte(s[:n]))) + "…"
}
