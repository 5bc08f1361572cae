package session

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolserverd/toolserverd/internal/approval"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// Nested calls: a running tool whose spec has Invokes (tool_chain) calls other tools of
// its session. Each nested call is planned and executed as a one-call batch of the same
// session, so it takes exactly the path of a call from the model — whitelist,
// argument validation, permission check, approval, serialization, timeout, progress —
// and gets its own tc_ id and record. Its tool_call_id is "{parent tc_ id}.{n}", which
// ties the record to the call that made it (the record has no parent column).

// NestedCallable says why a tool cannot be called by another tool, or nil when it can.
// Hosted tools run at the model provider, tools that invoke tools (tool_chain) would
// recurse, and stateful and external tools wait for an agent's or a person's answer
// that nobody inside a running call can give.
func NestedCallable(spec tool.Spec) error {
	switch {
	case spec.Hosted:
		return fmt.Errorf("%s is executed by the model provider, not by this daemon, so a chain cannot call it; call it directly", spec.Name)
	case spec.Invokes:
		return fmt.Errorf("%s calls other tools itself and cannot be called from within a chain", spec.Name)
	case spec.External:
		return fmt.Errorf("%s waits for an answer from outside the daemon and cannot be called from within a chain; call it directly", spec.Name)
	case spec.Mode == tool.ModeStateful:
		return fmt.Errorf("%s is stateful (it asks the agent for input) and cannot be called from within a chain; call it directly", spec.Name)
	}
	return nil
}

// nestedOpts are the limits a nested call runs under.
type nestedOpts struct {
	approvalTimeout time.Duration
	maxRisk         tool.Risk
}

// nestedSep joins a nested call's parent call id and its number into its tool call
// id (tc_….3).
const nestedSep = "."

// isNested reports whether a call record's tool call id is a nested call's.
func isNested(rec *store.Call) bool {
	parent, _, ok := strings.Cut(rec.ToolCallID, nestedSep)
	return ok && strings.HasPrefix(parent, "tc_")
}

// capRisk turns an allow into an ask when the call's risk is above the cap.
func (o *nestedOpts) capRisk(name string, d approval.Decision) approval.Decision {
	if o.maxRisk == "" || d.Outcome != approval.Allow || d.Risk.Rank() <= o.maxRisk.Rank() {
		return d
	}
	d.Outcome = approval.Ask
	d.Reason = fmt.Sprintf("%s has %s risk, above the highest risk a chain may run without approval (%s); %s", name, d.Risk, o.maxRisk, d.Reason)
	return d
}

// invoker runs the nested calls of one running call.
type invoker struct {
	x      *Executor
	sess   *Session
	parent *Call
	// emit is the parent's stream; nested calls forward only their approval and input
	// requests to it (their results belong to the parent, not to the model).
	emit func(Event)
	n    atomic.Int64

	mu     sync.Mutex
	closed bool
}

// close stops forwarding to the parent's stream: the parent has its result, and a tool
// that ignored cancellation must not write after it.
func (in *invoker) close() {
	in.mu.Lock()
	in.closed = true
	in.mu.Unlock()
}

func (in *invoker) forward(ev Event) {
	if in.emit == nil || (ev.Type != EventApproval && ev.Type != EventExternal) {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.closed {
		in.emit(ev)
	}
}

// Invoke implements tool.Invoker.
func (in *invoker) Invoke(ctx context.Context, nc tool.NestedCall) tool.NestedResult {
	in.mu.Lock()
	closed := in.closed
	in.mu.Unlock()
	if closed || ctx.Err() != nil {
		return tool.NestedResult{Result: tool.ErrorResult(tool.KindCancelled, "%s was not called: the calling tool %s has finished or was cancelled", nc.Name, in.parent.Name)}
	}
	req := CallRequest{
		ToolCallID: in.parent.ID + nestedSep + strconv.FormatInt(in.n.Add(1), 10),
		Name:       nc.Name,
		Arguments:  nc.Args,
	}
	opts := &nestedOpts{approvalTimeout: nc.ApprovalTimeout, maxRisk: nc.MaxRiskWithoutApproval}
	p, err := in.x.Plan(in.sess, Batch{Calls: []CallRequest{req}, Strategy: Sequential, nested: opts})
	if err != nil {
		return tool.NestedResult{Result: tool.ErrorResult(tool.KindInvalidArgs, "%s could not be called: %v", nc.Name, err)}
	}
	c := p.Calls[0]
	if c.entry != nil && nc.Timeout > 0 {
		if t := in.x.timeout(c.entry.Spec, 0); nc.Timeout < t {
			c.timeout = nc.Timeout
		}
	}
	var res *tool.Result
	in.x.Execute(ctx, p, func(ev Event) {
		if ev.Type == EventMessage {
			res = ev.full
			if res == nil {
				res = ev.Result
			}
			return
		}
		in.forward(ev)
	})
	if res == nil { // Execute always emits a message; be safe anyway
		res = tool.ErrorResult(tool.KindFailed, "%s produced no result", nc.Name)
	}
	return tool.NestedResult{CallID: c.ID, Result: res}
}
