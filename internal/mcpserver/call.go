package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpsrv "github.com/mark3labs/mcp-go/server"

	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/jsontext"
	"github.com/toolserverd/toolserverd/internal/progress"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// ActorMCPClient is recorded as the actor of decisions an MCP client took by
// answering an elicitation.
const ActorMCPClient = "mcp-client"

// errSessionDeleted ends a call whose client ended its MCP session.
var errSessionDeleted = errors.New("the client ended its MCP session")

// trackCall records cancel as the way to cancel a call of the MCP session mcpSID
// until the returned func is called; a session that has already ended cancels it at
// once (a DELETE that came while the call was being set up).
func (e *Endpoint) trackCall(mcpSID, callID string, cancel func()) (untrack func()) {
	e.mu.Lock()
	calls := e.open[mcpSID]
	if calls == nil {
		calls = map[string]func(){}
		e.open[mcpSID] = calls
	}
	calls[callID] = cancel
	e.mu.Unlock()
	if ended, _ := e.ids.Validate(mcpSID); ended {
		cancel()
	}
	return func() {
		e.mu.Lock()
		delete(e.open[mcpSID], callID)
		if len(e.open[mcpSID]) == 0 {
			delete(e.open, mcpSID)
		}
		e.mu.Unlock()
	}
}

// cancelCallsOf cancels by request the open calls of an MCP session its client ended.
func (e *Endpoint) cancelCallsOf(mcpSID string) {
	e.mu.Lock()
	cancels := make([]func(), 0, len(e.open[mcpSID]))
	for _, cancel := range e.open[mcpSID] {
		cancels = append(cancels, cancel)
	}
	e.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}

// callTool runs one tools/call as a batch of one call of the session: the same
// path as POST /v1/sessions/{id}/tool-calls. notifications/cancelled cancels the
// call; a client that went away does once the resume window passes without it
// resuming the call's stream (see resume.go).
func (e *Endpoint) callTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	sess := sessionFrom(ctx)
	if sess == nil {
		return nil, errors.New("no toolserverd session in this request")
	}
	args, argErr := rawArguments(req)
	call := session.CallRequest{ToolCallID: session.NewID("mcp_"), Name: req.Params.Name, Arguments: args, ArgError: argErr}
	plan, err := e.deps.Exec.Plan(sess, session.Batch{Calls: []session.CallRequest{call}, Strategy: session.Parallel})
	if err != nil {
		return nil, err
	}
	c := plan.Calls[0]
	// The call runs as long as the HTTP request's context (detached from the
	// connection: until the resume window passes without a client, or the daemon
	// stops). notifications/cancelled ends ctx while that is still open: the client
	// cancelled the call, so it is cancelled by request (a call waiting for a
	// decision withdraws its request) rather than left as by a client that went
	// away.
	execCtx := ctx
	if httpCtx, ok := ctx.Value(requestKey{}).(context.Context); ok {
		var cancelExec context.CancelCauseFunc
		execCtx, cancelExec = context.WithCancelCause(context.WithoutCancel(ctx))
		defer cancelExec(nil)
		stopHTTP := context.AfterFunc(httpCtx, func() { cancelExec(context.Cause(httpCtx)) })
		defer stopHTTP()
		stopCancelled := context.AfterFunc(ctx, func() {
			if httpCtx.Err() != nil || !e.deps.Exec.Cancel(c.ID) {
				cancelExec(context.Cause(ctx))
			}
		})
		defer stopCancelled()
		// A client that ends its MCP session (DELETE) can no longer get the result,
		// nor resume the stream: its open calls are cancelled by request. go-sdk's
		// client sends notifications/cancelled on a goroutine of its own that its
		// Close does not wait for, so a call cancelled just before the session is
		// closed may have only the DELETE to tell.
		if cs := mcpsrv.ClientSessionFromContext(ctx); cs != nil {
			defer e.trackCall(cs.SessionID(), c.ID, func() {
				if !e.deps.Exec.Cancel(c.ID) {
					cancelExec(errSessionDeleted)
				}
			})()
		}
	}

	n := &notifier{srv: e.mcp, ctx: ctx, lastAt: time.Now()}
	if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
		n.token = req.Params.Meta.ProgressToken
	}
	// Helpers (progress forwarding, keepalive, elicitation) end before the result is
	// returned.
	helpers, stopHelpers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopHelpers()
	if n.token != nil && e.cfg.KeepAlive > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.keepAlive(helpers, e.cfg.KeepAlive, c.Name)
		}()
	}
	var sub *progress.Subscription
	if n.token != nil && e.deps.Progress != nil {
		sub = e.deps.Progress.Subscribe(progress.Filter{CallIDs: []string{c.ID}, Buffer: 64})
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.forwardProgress(sub, c.ID, n)
		}()
	}

	var result *tool.Result
	e.deps.Exec.Execute(execCtx, plan, func(ev session.Event) {
		switch ev.Type {
		case session.EventMessage:
			result = e.conforming(c, ev)
		case session.EventApproval:
			n.setAwaited("approval " + ev.Approval.ID)
			n.note(fmt.Sprintf("%s is waiting for approval %s (risk %s): %s", c.Name, ev.Approval.ID, ev.Approval.Risk, ev.Approval.Reason))
			if e.elicits(ctx) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					e.askClient(helpers, c.ID, c.Name, ev.Approval, n)
				}()
			}
		case session.EventQueued:
			// The session runs its calls of tools that are not concurrency-safe one
			// at a time: a client that sent several at once hears why this one has
			// not started.
			behind := "the session's previous call"
			if ev.Behind != nil {
				behind = fmt.Sprintf("the session's call %s (%s)", ev.Behind.ID, ev.Behind.Name)
			}
			n.setQueued(behind)
			n.note(fmt.Sprintf("%s waits for %s to finish: a session runs its calls of tools that are not concurrency-safe one at a time", c.Name, behind))
		case session.EventExternal:
			n.note(fmt.Sprintf("%s is waiting for its answer at POST /v1/tool-calls/%s/result", c.Name, c.ID))
		case session.EventYield:
			n.note(fmt.Sprintf("%s yielded and waits for input at POST /v1/tool-calls/%s/input: %s", c.Name, c.ID, ev.Result.Text()))
		}
	})
	if sub != nil {
		// The call's progress is complete before its message: what is buffered is
		// all there is; the forwarder drains it and ends.
		sub.Close()
	}
	stopHelpers()
	wg.Wait()
	if result == nil {
		return nil, errors.New("the call ended without a result")
	}
	return toCallToolResult(c.ID, result), nil
}

// conforming is a message's result for an MCP client. A tool that advertises an
// output schema must return structured content conforming to it in every result that
// is not an error (the TypeScript SDK client throws on one without), and a cut JSON
// value would not conform: when the token budget took the structured output out of
// the message, the result is cut again with it kept whole and the text giving way. A
// result with no structured object to send (the tool gave none, or one nested too
// deep to send) cannot conform: it is sent as an error, its text kept, which clients
// take.
func (e *Endpoint) conforming(c *session.Call, ev session.Event) *tool.Result {
	msg, full := ev.Result, ev.Full()
	if msg == nil || msg.IsError {
		return msg
	}
	if sp, ok := c.Spec(); !ok || len(sp.AdvertisedOutputSchema()) == 0 {
		return msg
	}
	if len(msg.Structured) == 0 && full != nil && len(full.Structured) > 0 {
		msg = e.deps.Exec.TruncateKeepingStructured(full)
	}
	if s := bytes.TrimSpace(msg.Structured); len(s) > 0 && s[0] == '{' {
		return msg
	}
	out := *msg
	out.Content = append(slices.Clip(msg.Content), tool.Content{Type: tool.ContentText, Text: fmt.Sprintf(
		"[toolserverd: %s declares an output schema, and this result has no structured object to send with it; MCP clients take such a result only as an error]", c.Name)})
	out.IsError, out.ErrorKind = true, tool.KindFailed
	return &out
}

// rawArguments returns the call's arguments as JSON, or why they cannot be used.
func rawArguments(req mcp.CallToolRequest) (json.RawMessage, string) {
	var raw json.RawMessage
	switch v := req.GetRawArguments().(type) {
	case json.RawMessage:
		raw = v
	case nil:
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err.Error()
		}
		raw = b
	}
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`)
	}
	return raw, ""
}

// notifier sends notifications/progress for one request with a progress token. The
// MCP specification wants progress to increase with each notification of a request:
// text notifications count up from 1 until the call reports numeric progress; from
// then on text notifications go just above the last value sent, and the call's values
// are sent as they are when they rise above it (the others go out as text: their
// line, without a new total).
type notifier struct {
	srv   *mcpsrv.MCPServer
	ctx   context.Context
	token mcp.ProgressToken

	mu      sync.Mutex
	lastAt  time.Time // when the last notification was sent (or the call began)
	awaited string    // what the call last waited for ("approval apr_…"), for keepalives
	queued  string    // the call it waits behind, until it runs (its first output)
	last    float64   // the progress of the last notification sent
	sent    bool      // a notification was sent
	numeric bool      // the call reported numeric progress: text no longer counts up
	total   float64   // the total of the last numeric progress sent (0: unknown)
}

// note sends text.
func (n *notifier) note(msg string) {
	if n.token == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.bump()
	n.send(n.last, n.total, msg)
}

// report sends a numeric progress value if it rises above what was sent; it reports
// whether it did.
func (n *notifier) report(v progress.Value) bool {
	if n.token == nil {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// From the first report on, text no longer counts up: a count ahead of the
	// call's values (text sent before its first report) would stay ahead of them.
	n.numeric = true
	if n.sent && v.Progress <= n.last {
		return false
	}
	n.last, n.total = v.Progress, v.Total
	n.send(v.Progress, v.Total, v.Message)
	return true
}

// setAwaited names what the call waits for in later keepalive notes.
func (n *notifier) setAwaited(what string) {
	n.mu.Lock()
	n.awaited = what
	n.mu.Unlock()
}

// setQueued names the call this one waits behind in later keepalive notes, until
// its output begins (ran).
func (n *notifier) setQueued(behind string) {
	n.mu.Lock()
	n.queued = behind
	n.mu.Unlock()
}

// ran says the call runs: it no longer waits behind another.
func (n *notifier) ran() {
	n.mu.Lock()
	n.queued = ""
	n.mu.Unlock()
}

// keepAlive sends a note whenever nothing was sent for every, until ctx ends. A call
// waiting for a person may be quiet for minutes: clients that time requests out
// restart the clock on progress (the TypeScript SDK's resetTimeoutOnProgress), and
// proxies cut streams that stay idle, as they would the REST API's NDJSON stream
// without its keepalive lines.
func (n *notifier) keepAlive(ctx context.Context, every time.Duration, name string) {
	begun := time.Now()
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.mu.Lock()
		next := every - time.Since(n.lastAt)
		if next <= 0 {
			msg := fmt.Sprintf("still waiting for %s after %s", name, time.Since(begun).Round(time.Second))
			switch {
			case n.queued != "":
				msg += " (it waits for " + n.queued + " to finish)"
			case n.awaited != "":
				msg += " (it asked for " + n.awaited + ")"
			}
			n.bump()
			n.send(n.last, n.total, msg)
			next = every
		}
		n.mu.Unlock()
		t.Reset(next)
	}
}

// bump moves last to the progress of the next text notification.
func (n *notifier) bump() {
	if n.numeric {
		// The next number up: the value a bar shows stays where the call is.
		n.last = math.Nextafter(n.last, math.Inf(1))
	} else {
		n.last++
	}
}

func (n *notifier) send(progress, total float64, msg string) {
	n.sent = true
	n.lastAt = time.Now()
	params := map[string]any{"progressToken": n.token, "progress": progress}
	if total > 0 {
		params["total"] = total
	}
	if msg != "" {
		params["message"] = msg
	}
	// Non-blocking in mcp-go: a client that does not read loses notifications, and
	// the call is never held up by them.
	_ = n.srv.SendNotificationToClient(n.ctx, string(mcp.MethodNotificationProgress), params)
}

// forwardProgress sends the call's output as progress notifications, in order,
// filling from the call's log what the subscription dropped. An event with numeric
// progress is sent as that value (its text is the report's line, said by the value);
// when the subscription ends the call's latest value goes out if it was missed.
func (e *Endpoint) forwardProgress(sub *progress.Subscription, callID string, n *notifier) {
	cursor := map[string]int64{}
	for ev := range sub.Events() {
		if ev.Closed {
			continue
		}
		n.ran()
		if cur := cursor[ev.Stream]; ev.Offset > cur {
			data, next, _, err := e.deps.Progress.Read(ev.CallID, ev.Stream, cur, int(ev.Offset-cur))
			if err == nil && len(data) > 0 {
				n.note(string(data))
				cursor[ev.Stream] = next
			}
		}
		end := ev.Offset + int64(len(ev.Text))
		if cur := cursor[ev.Stream]; end > cur {
			text := ev.Text
			if skip := cur - ev.Offset; skip > 0 {
				text = text[skip:]
			}
			if ev.Progress == nil || !n.report(*ev.Progress) {
				n.note(text)
			}
			cursor[ev.Stream] = end
		}
	}
	if v, ok := e.deps.Progress.Latest(callID); ok {
		n.report(v)
	}
}

// elicits reports whether the client declared form-mode elicitation (the question is
// a form; MCP forbids sending one to a client that declared only URL mode, and an
// empty declaration means form mode), decisions can be recorded, and the request's
// key may decide approvals (the approver role, as on POST
// /v1/approvals/{id}/decision): an agent key does not approve its own calls.
func (e *Endpoint) elicits(ctx context.Context) bool {
	if e.deps.Approvals == nil || e.deps.Notifier == nil {
		return false
	}
	if p := auth.From(ctx); p == nil || !p.Has(auth.RoleApprover) {
		return false
	}
	cs, ok := mcpsrv.ClientSessionFromContext(ctx).(mcpsrv.SessionWithClientInfo)
	if !ok {
		return false
	}
	el := cs.GetClientCapabilities().Elicitation
	return el != nil && (el.Form != nil || el.URL == nil)
}

// elicitRounds is how many times askClient asks the client about one approval: an
// approval that could not be applied (the policy could not be checked) is asked
// again, so that the person can try again or deny, a bounded number of times.
const elicitRounds = 3

// askClient asks the client, by elicitation, to decide an approval the call waits
// for. Accept approves and decline denies, recorded like a REST decision with the
// actor mcp-client (an approval re-checked against the policy's deny rules, as on
// REST); cancel (or no answer before a REST decision) decides nothing. An accept the
// policy could not be checked against is not applied, as on REST: the client is
// asked again, told so (try again, deny, or leave it pending), up to elicitRounds
// times, and then told through progress (n) that the request stays pending.
func (e *Endpoint) askClient(ctx context.Context, callID, name string, apr *store.Approval, n *notifier) {
	// A person reads the arguments: "make && make install > log" as written, where
	// JSON (json.MarshalIndent, or the client's own encoder: mcp-go's escapes them)
	// may have \u0026\u0026 and \u003e.
	var args string
	var b bytes.Buffer
	if err := json.Indent(&b, apr.Arguments, "", "  "); err == nil {
		args = string(jsontext.UnescapeHTML(b.Bytes()))
	}
	question := fmt.Sprintf("Allow %s to run? Risk: %s. %s\nArguments: %s\nAccept to approve, decline to deny.", name, apr.Risk, apr.Reason, args)
	bg := context.WithoutCancel(ctx)
	for round := 1; ; round++ {
		d, ok := e.elicitDecision(ctx, apr, question)
		if !ok {
			return
		}
		dctx, cancel := context.WithTimeout(bg, 30*time.Second)
		if d.Kind == store.DecisionApprove {
			// As on REST: a person's approval does not run what the policy now denies
			// (a link the command reads turned to the daemon's data, a deny rule), and
			// an approval the policy could not be checked against is not applied.
			denied, why, err := e.deps.Exec.DeniedNow(dctx, e.deps.Sessions, callID)
			if err != nil {
				cancel()
				e.deps.Log.Error("mcp endpoint: the client approved, but the policy could not be checked against the call; the approval was not applied",
					"approval_id", apr.ID, "call_id", callID, "round", round, "err", err)
				if ctx.Err() != nil {
					return
				}
				if round == elicitRounds {
					n.note(fmt.Sprintf("The approval of %s was not applied: the policy's rules could not be checked against the call (%d tries); "+
						"nothing was decided and approval %s is still pending: decide it at POST /v1/approvals/%s/decision", name, round, apr.ID, apr.ID))
					return
				}
				question = fmt.Sprintf("Your approval of %s was not applied: the policy's rules could not be checked against the call just now, "+
					"so nothing was decided and the request (approval %s) is still pending.\n"+
					"Accept to try again, decline to deny it, or cancel to leave it pending for a decision at POST /v1/approvals/%s/decision.\n"+
					"Risk: %s. %s\nArguments: %s", name, apr.ID, apr.ID, apr.Risk, apr.Reason, args)
				continue
			}
			if denied {
				d = session.PolicyDenial(ActorMCPClient, why)
			}
		}
		e.recordClientDecision(ctx, dctx, callID, apr, d)
		cancel()
		return
	}
}

// metaApprovalID names, in an elicitation request's _meta, the approval it asks about.
const metaApprovalID = "toolserverd/approval_id"

// asked is an approval question sent to a client by elicitation, until its answer (or
// the end of the wait for it). mcp-go gives the request its JSON-RPC id and does not
// say which: the id is read from the request as it is stored on its way to the client
// (noteElicitation), so that a question nobody needs an answer to any more (the
// approval was decided through REST, the call was cancelled or ended) is withdrawn
// with notifications/cancelled. Otherwise the client kept showing it, and its answer
// got a 400.
type asked struct{ id json.RawMessage }

func elicitationKey(mcpSID, approvalID string) string { return mcpSID + "\x00" + approvalID }

// noteElicitation records the JSON-RPC id of an elicitation request for an approval
// question open with the MCP session's client.
func (e *Endpoint) noteElicitation(mcpSID string, message json.RawMessage) {
	if !bytes.Contains(message, []byte(mcp.MethodElicitationCreate)) {
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(message, &req) != nil || req.Method != string(mcp.MethodElicitationCreate) || len(req.ID) == 0 {
		return
	}
	approvalID, _ := req.Params.Meta[metaApprovalID].(string)
	e.mu.Lock()
	if a := e.asking[elicitationKey(mcpSID, approvalID)]; a != nil {
		a.id = req.ID
	}
	e.mu.Unlock()
}

// elicitDecision asks the client question about apr and returns its decision; false
// when it decided nothing (cancel, no answer, a failed request). A question still
// open when ctx ends (the call no longer waits for it) is withdrawn.
func (e *Endpoint) elicitDecision(ctx context.Context, apr *store.Approval, question string) (store.ApprovalDecision, bool) {
	var mcpSID string
	if cs := mcpsrv.ClientSessionFromContext(ctx); cs != nil {
		mcpSID = cs.SessionID()
	}
	a, key := &asked{}, elicitationKey(mcpSID, apr.ID)
	e.mu.Lock()
	e.asking[key] = a
	e.mu.Unlock()
	res, err := e.mcp.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
		Meta:    &mcp.Meta{AdditionalFields: map[string]any{metaApprovalID: apr.ID}},
		Message: question,
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
			"reason": map[string]any{"type": "string", "title": "Reason", "description": "Optional note recorded with the decision."},
		}},
	}})
	e.mu.Lock()
	delete(e.asking, key)
	id := a.id
	e.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			e.deps.Log.Info("mcp endpoint: elicitation for an approval failed; waiting for a REST decision", "approval_id", apr.ID, "err", err)
		} else if id != nil && mcpSID != "" {
			// Best effort: a client with no event stream open does not hear of it.
			_ = e.mcp.SendNotificationToSpecificClient(mcpSID, string(mcp.MethodNotificationCancelled), map[string]any{
				"requestId": id,
				"reason":    "the call no longer waits for this answer: approval " + apr.ID + " was decided elsewhere, or the call was cancelled or ended",
			})
		}
		return store.ApprovalDecision{}, false
	}
	d := store.ApprovalDecision{Actor: ActorMCPClient}
	switch res.Action {
	case mcp.ElicitationResponseActionAccept:
		d.Kind = store.DecisionApprove
	case mcp.ElicitationResponseActionDecline:
		d.Kind, d.Reason = store.DecisionDeny, "declined by the MCP client"
	default:
		return d, false
	}
	if m, ok := res.Content.(map[string]any); ok {
		if r, ok := m["reason"].(string); ok && r != "" {
			d.Reason = r
		}
	}
	if d.Kind == store.DecisionDeny {
		d.Result = store.DeniedResult("the user", d.Reason) // the model reads this, not "mcp-client"
	}
	return d, true
}

// recordClientDecision records the client's decision d of apr (dctx bounds the
// store's work) and wakes the call; an approved call whose waiter is gone (ctx
// done) is run here.
func (e *Endpoint) recordClientDecision(ctx, dctx context.Context, callID string, apr *store.Approval, d store.ApprovalDecision) {
	bg := context.WithoutCancel(ctx)
	decided, err := e.deps.Approvals.DecideApproval(dctx, apr.ID, d)
	if errors.Is(err, store.ErrConflict) {
		return // decided through REST meanwhile
	}
	if err != nil {
		e.deps.Log.Error("mcp endpoint: recording the client's decision failed", "approval_id", apr.ID, "err", err)
		return
	}
	_ = e.deps.Notifier.Notify(bg, store.TopicApproval, decided.ID)
	if decided.Status != store.ApprovalApproved {
		_ = e.deps.Notifier.Notify(bg, store.TopicCall, callID)
		return
	}
	if ctx.Err() != nil {
		// The call stopped waiting as the answer came: run it here (a live waiter
		// that claimed it first wins, and this returns a conflict).
		if err := e.deps.Exec.RunApproved(bg, e.deps.Sessions, callID); err != nil && !errors.Is(err, store.ErrConflict) {
			e.deps.Log.Error("mcp endpoint: running an approved call failed", "call_id", callID, "err", err)
		}
	}
}
