package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/toolserverd/toolserverd/internal/approval"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// EventApproval is emitted when a call waits for a person's decision.
const EventApproval EventType = "approval_required"

// TopicApprovalCreated is notified (payload: approval id) when a call starts waiting
// for a decision, for approvers' long polls.
const TopicApprovalCreated = "approval_created"

// Policy decides whether a call may run.
type Policy interface {
	Check(approval.Request) approval.Decision
}

// ApprovalStore is the durable side of asks.
type ApprovalStore interface {
	CreateApproval(ctx context.Context, a *store.Approval) error
	GetApproval(ctx context.Context, id string) (*store.Approval, error)
	ClaimCall(ctx context.Context, callID, owner string, at time.Time) error
	GetCall(ctx context.Context, id string) (*store.Call, error)
	// WaitCall marks a call as waiting for an external answer (a durable wait).
	WaitCall(ctx context.Context, id string) error
}

// EventExternal is emitted when a call of an external tool (ask_user) waits for an
// answer posted to POST /v1/tool-calls/{id}/result.
const EventExternal EventType = "input_required"

// external waits, durably, for the answer to an external tool's call.
func (x *Executor) external(ctx context.Context, c *Call, emit func(Event)) (*tool.Result, error) {
	if x.perm == nil {
		return tool.ErrorResult(tool.KindUnavailable, "%s needs an answer from outside, which this daemon cannot wait for", c.Name), nil
	}
	wctx, cancel := x.recordCtx(ctx)
	err := x.perm.Store.WaitCall(wctx, c.ID)
	cancel()
	if err != nil {
		return tool.ErrorResult(tool.KindUnavailable, "%s could not wait for its answer: %v", c.Name, err), nil
	}
	if emit != nil {
		emit(Event{Type: EventExternal, Call: c, TS: time.Now()})
	}
	if c.nested == nil {
		defer x.waitingDurably(c.ID)()
	}
	return x.awaitResult(ctx, c.ID)
}

// Notifier wakes waiters; every notification is a hint to re-read the store.
type Notifier interface {
	Notify(ctx context.Context, topic, payload string) error
	Subscribe(topic string) (<-chan string, func())
}

// Permissions is what the executor needs to gate calls.
type Permissions struct {
	Policy   Policy
	Store    ApprovalStore
	Notifier Notifier
	// TTL is how long an approval request waits before it expires (denied).
	TTL time.Duration
	// AutoApprove turns asks into allows (development only); deny rules still deny.
	AutoApprove bool
	// Recheck is how often a waiter re-reads the store besides notifications.
	Recheck time.Duration
}

// UsePermissions gates every call of this executor through p. Call before serving.
func (x *Executor) UsePermissions(p *Permissions) {
	if p.TTL <= 0 {
		p.TTL = time.Hour
	}
	if p.Recheck <= 0 {
		p.Recheck = 2 * time.Second
	}
	x.perm = p
}

// decide runs the policy for a call of sess.
func (x *Executor) decide(sess *Session, c *Call) approval.Decision {
	d := x.perm.Policy.Check(approval.Request{
		Tool: c.entry.Tool, Args: c.Arguments, Mode: approval.Mode(sess.CurrentSpec().PermissionMode),
		SessionRules: sess.Rules(), Workdir: sess.Info.Workdir,
	})
	if c.nested != nil {
		d = c.nested.capRisk(c.Name, d)
	}
	// Immune asks (rm -rf /, $(…), writes to .git or .env) are never auto-approved.
	if d.Outcome == approval.Ask && x.perm.AutoApprove && !d.Immune {
		d.Outcome, d.Reason = approval.Allow, "auto-approved (permissions.auto_approve): "+d.Reason
	}
	return d
}

// AllowedNow reports whether the policy would now let the waiting call callID of a
// session run without asking (an approval "for session" added a rule that covers it,
// as for the other calls of a parallel batch that asked for the same thing), and
// why. A nested call (a chain's) is never allowed so: its chain's risk cap holds for
// it, and a person decides it.
func (x *Executor) AllowedNow(ctx context.Context, sessions *Manager, callID string) (bool, string, error) {
	rec, d, err := x.policyNow(ctx, sessions, callID)
	if err != nil || d == nil || isNested(rec) {
		return false, "", err
	}
	return d.Outcome == approval.Allow, d.Reason, nil
}

// DeniedNow reports whether the policy would now deny the waiting call callID (a deny
// rule added while it waited, with the restart that loads it), and why: a person's
// approval must not run what the rules now forbid.
func (x *Executor) DeniedNow(ctx context.Context, sessions *Manager, callID string) (bool, string, error) {
	_, d, err := x.policyNow(ctx, sessions, callID)
	if err != nil || d == nil {
		return false, "", err
	}
	return d.Outcome == approval.Deny, d.Reason, nil
}

// PolicyDenial is the decision recorded when actor approves a call the policy now
// denies (why, from DeniedNow), through REST or an MCP client's elicitation alike:
// the request is denied in the policy's name (ByPolicy), and the model reads that.
func PolicyDenial(actor, why string) store.ApprovalDecision {
	return store.ApprovalDecision{Kind: store.DecisionDeny, Actor: actor, ByPolicy: true,
		Reason: "the policy now denies it (" + why + "), which it did not when the request was made",
		Result: store.DeniedResult("the policy", why)}
}

// DeniedByPolicy reports whether d was recorded by PolicyDenial: its actor approved,
// the policy denied. It goes by the flag stored with the decision, never by the
// reason, which a person may word as they like.
func DeniedByPolicy(d *store.ApprovalDecision) bool {
	return d != nil && d.Kind == store.DecisionDeny && d.ByPolicy
}

// policyNow is the policy's decision now for the waiting call callID; nil when the
// call no longer waits or its session no longer has its tool.
func (x *Executor) policyNow(ctx context.Context, sessions *Manager, callID string) (*store.Call, *approval.Decision, error) {
	if x.perm == nil {
		return nil, nil, errors.New("permissions are not enabled")
	}
	rec, err := x.perm.Store.GetCall(ctx, callID)
	if err != nil {
		return nil, nil, err
	}
	if rec.Status != store.CallWaiting {
		return rec, nil, nil
	}
	sess, err := sessions.Get(ctx, rec.Tenant, rec.SessionID)
	if err != nil {
		return rec, nil, err
	}
	_, e, ok := sess.Tools.Resolve(rec.Name)
	if !ok {
		return rec, nil, nil
	}
	c := &Call{ID: rec.ID, CallRequest: CallRequest{ToolCallID: rec.ToolCallID, Name: rec.Name, Arguments: rec.Arguments}, entry: e}
	d := x.decide(sess, c)
	return rec, &d, nil
}

// precheck runs a tool's Precheck; a panic in it is logged and asks as usual (the
// call's Run, which is guarded, then reports what is wrong).
func (x *Executor) precheck(pc tool.Prechecker, tc *tool.Context, args json.RawMessage) (err error) {
	defer func() {
		if r := recover(); r != nil {
			x.log.ErrorContext(tc.Context, "tool precheck panicked", "tool", tc.ToolName, "call_id", tc.CallID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = nil
		}
	}()
	return pc.Precheck(tc, args)
}

// errLeftWaiting means the caller went away while the call waited for a decision:
// the approval stays pending and the call's record stays waiting, to be run by
// whoever decides.
var errLeftWaiting = errors.New("left waiting for a decision")

// permit gates one call. It returns run=true when the call may run now (claimed=true
// when an approval's claim already marked it running), or the result to answer with.
func (x *Executor) permit(ctx context.Context, sess *Session, c *Call, emit func(Event)) (run, claimed bool, res *tool.Result, err error) {
	// Allowed at plan time stays allowed: rules added since then only allow more.
	if x.perm == nil || c.planned == approval.Allow {
		return true, false, nil, nil
	}
	d := x.decide(sess, c)
	switch d.Outcome {
	case approval.Allow:
		return true, false, nil, nil
	case approval.Deny:
		return false, false, tool.ErrorResult(tool.KindDenied, "%s was not run: %s", c.Name, d.Reason), nil
	}
	// Nobody is asked to approve a call its tool would refuse anyway.
	if pc, ok := c.entry.Tool.(tool.Prechecker); ok {
		tc := &tool.Context{Context: ctx, CallID: c.ID, ToolCallID: c.ToolCallID, ToolName: c.Name, Session: sess.Info, ReadOnly: sess.ReadOnly(), Progress: tool.NoProgress}
		if err := x.precheck(pc, tc, c.Arguments); err != nil {
			return false, false, tool.FromError(err), nil
		}
	}
	suggestions := make([]string, len(d.Suggestions))
	for i, r := range d.Suggestions {
		suggestions[i] = r.String()
	}
	sj, _ := json.Marshal(suggestions)
	// Microseconds, as the stores keep times: the approval_required event and every
	// later read of the request give the same created_at and expires_at.
	now := time.Now().UTC().Truncate(time.Microsecond)
	exp := now.Add(x.perm.TTL)
	if c.nested != nil && c.nested.approvalTimeout > 0 && c.nested.approvalTimeout < x.perm.TTL {
		// A chained call waits only as long as its chain allows; the request expires
		// then, so a late approval cannot run a call the chain has given up on.
		exp = now.Add(c.nested.approvalTimeout)
	}
	apr := &store.Approval{
		ID: NewID("apr_"), CallID: c.ID, Arguments: validJSONOrString(c.Arguments), Risk: d.Risk,
		Reason: d.Reason, Suggestions: sj, CreatedAt: now, ExpiresAt: &exp,
	}
	decided, stop := x.perm.Notifier.Subscribe(store.TopicApproval)
	defer stop()
	wctx, cancel := x.recordCtx(ctx)
	err = x.perm.Store.CreateApproval(wctx, apr)
	cancel()
	if err != nil {
		x.log.Error("creating approval failed", "call_id", c.ID, "err", err)
		return false, false, tool.ErrorResult(tool.KindUnavailable, "%s needs approval, but the request could not be recorded: try again", c.Name), nil
	}
	c.approved = true
	_ = x.perm.Notifier.Notify(context.WithoutCancel(ctx), TopicApprovalCreated, apr.ID)
	emit(Event{Type: EventApproval, Call: c, Approval: apr, Suggestions: suggestions, TS: time.Now()})
	if c.nested == nil { // a chained call's wait ends with its chain's
		defer x.waitingDurably(c.ID)()
	}

	tick := time.NewTicker(x.perm.Recheck)
	defer tick.Stop()
	expiry := time.NewTimer(time.Until(exp))
	defer expiry.Stop()
	for {
		select {
		case <-ctx.Done():
			if cancelledByRequest(ctx) {
				return x.cancelWaiting(ctx, c, apr.ID)
			}
			if c.nested != nil {
				// Nobody must approve, later, a call its chain already reported as not
				// run; its record (and the count of it) says what the chain was told.
				res := tool.ErrorResult(tool.KindCancelled, "%s was not run: the chain that made the call stopped while it waited for approval, and the request was withdrawn", c.Name)
				if _, err := x.withdraw(ctx, apr.ID, "the chain that made this call stopped waiting for a decision", res); err == nil {
					return false, false, res, errFinishedElsewhere
				}
			}
			return false, false, nil, errLeftWaiting
		case <-expiry.C:
			// Expire it now rather than at the next sweep, so the wait ends on time.
			x.expireDue(ctx)
		case id, ok := <-decided:
			if !ok {
				decided = nil
				continue
			}
			if id != "" && id != apr.ID {
				continue
			}
		case <-tick.C:
		}
		cur, err := x.perm.Store.GetApproval(ctx, apr.ID)
		if err != nil {
			continue
		}
		switch cur.Status {
		case store.ApprovalPending:
			continue
		case store.ApprovalApproved:
			err := x.perm.Store.ClaimCall(context.WithoutCancel(ctx), c.ID, x.cfg.Owner, time.Now().UTC())
			if err == nil {
				return true, true, nil, nil
			}
			if !errors.Is(err, store.ErrConflict) {
				return false, false, tool.ErrorResult(tool.KindUnavailable, "%s was approved but could not be started: %v", c.Name, err), nil
			}
			// Another replica claimed it (the decider, when nobody was waiting there).
			res, err := x.awaitResult(ctx, c.ID)
			return false, false, res, err
		default: // denied or expired: the store has finished the call
			res, err := x.awaitResult(ctx, c.ID)
			return false, false, res, err
		}
	}
}

// awaitResult waits until a call finished elsewhere and returns its result.
func (x *Executor) awaitResult(ctx context.Context, id string) (*tool.Result, error) {
	finished, stop := x.perm.Notifier.Subscribe(store.TopicCall)
	defer stop()
	tick := time.NewTicker(x.perm.Recheck)
	defer tick.Stop()
	for {
		rec, err := x.perm.Store.GetCall(ctx, id)
		if err == nil && rec.Status.Terminal() && rec.Result != nil {
			return rec.Result, errFinishedElsewhere
		}
		select {
		case <-ctx.Done():
			return nil, errLeftWaiting
		case <-finished:
		case <-tick.C:
		}
	}
}

// errNoWithdraw: the approval store cannot decide requests itself.
var errNoWithdraw = errors.New("the approval store cannot withdraw requests")

// withdraw denies a pending approval request on the system's behalf, for reason; the
// store then finishes its call with res, or as denied when res is nil. A person who
// decided first wins: ErrConflict, with the approval as it is.
func (x *Executor) withdraw(ctx context.Context, approvalID, reason string, res *tool.Result) (*store.Approval, error) {
	d, ok := x.perm.Store.(interface {
		DecideApproval(ctx context.Context, id string, d store.ApprovalDecision) (*store.Approval, error)
	})
	if !ok {
		return nil, errNoWithdraw
	}
	wctx, cancel := x.recordCtx(ctx)
	defer cancel()
	a, err := d.DecideApproval(wctx, approvalID, store.ApprovalDecision{Kind: store.DecisionDeny, Actor: store.AuditActorSystem,
		Reason: reason, Result: res, At: time.Now().UTC()})
	if err != nil {
		return a, err
	}
	_ = x.perm.Notifier.Notify(wctx, store.TopicApproval, approvalID)
	_ = x.perm.Notifier.Notify(wctx, store.TopicCall, "")
	return a, nil
}

// expireDue expires the approval requests whose deadline has passed, when the store
// can, and wakes their waiters.
func (x *Executor) expireDue(ctx context.Context) {
	ex, ok := x.perm.Store.(interface {
		ExpireApprovals(ctx context.Context, at time.Time) ([]*store.Approval, error)
	})
	if !ok {
		return
	}
	wctx, cancel := x.recordCtx(ctx)
	defer cancel()
	if expired, err := ex.ExpireApprovals(wctx, time.Now().UTC()); err != nil {
		x.log.Error("expiring approvals failed", "err", err)
	} else if len(expired) > 0 {
		_ = x.perm.Notifier.Notify(wctx, store.TopicApproval, "")
		_ = x.perm.Notifier.Notify(wctx, store.TopicCall, "")
	}
}

// errFinishedElsewhere marks a result that is already recorded (denied, expired, or
// run by another replica): it must not be recorded again, nor counted again (what
// recorded it counts it).
var errFinishedElsewhere = errors.New("finished elsewhere")

// RunApproved runs an approved call that nobody is waiting for (its stream went away,
// or the daemon restarted): it claims the call — exactly one claimer wins — and runs
// it from its record. The result goes to the record and to waiters of the call.
func (x *Executor) RunApproved(ctx context.Context, sessions *Manager, callID string) error {
	if x.perm == nil {
		return errors.New("permissions are not enabled")
	}
	// Counted before the claim and under the lock ReleaseWaiting takes: once the daemon
	// stops, no approved call starts (the drain's Wait may be over, the store closing)
	// and the call stays approved, for another replica's sweep or the restarted one's.
	x.mu.Lock()
	if x.releasing {
		x.mu.Unlock()
		return fmt.Errorf("approved call %s left for the next sweep: %w", callID, ErrShuttingDown)
	}
	x.wg.Add(1)
	x.mu.Unlock()
	defer x.wg.Done()
	rec, err := x.perm.Store.GetCall(ctx, callID)
	if err != nil {
		return err
	}
	if err := x.perm.Store.ClaimCall(ctx, callID, x.cfg.Owner, time.Now().UTC()); err != nil {
		return err // ErrConflict: someone else runs it
	}
	ctx, untrack := x.track(ctx, callID)
	defer untrack()
	start := time.Now()
	c := &Call{ID: rec.ID, CallRequest: CallRequest{ToolCallID: rec.ToolCallID, Name: rec.Name, Arguments: rec.Arguments}, approved: true}
	ctx = x.beginCall(ctx, rec.SessionID, rec.Tenant, c)
	var res *tool.Result
	sess, err := sessions.Get(ctx, rec.Tenant, rec.SessionID)
	if err == nil {
		defer sess.hold()()
		if m, e, ok := sess.Tools.Resolve(rec.Name); ok {
			c.manager, c.entry = m, e
		}
	}
	started := false
	switch {
	case err != nil:
		res = tool.ErrorResult(tool.KindFailed, "the call's session could not be loaded: %v", err)
	case c.entry == nil:
		res = tool.ErrorResult(tool.KindNotFound, "tool %q is no longer available in this session", rec.Name)
	default:
		// Nobody waits for it, but it is still one of the session's calls: a tool that is
		// not concurrency-safe waits for the session's lock like any other.
		// (A background tool runs detached for as long as it takes: never under the lock.)
		unlock := func() {}
		if c.entry.Spec.Mode != tool.ModeBackground {
			var r *tool.Result
			if unlock, r = x.serialize(ctx, sess, c, nil); r != nil {
				res = r
				break
			}
		}
		res, started = x.run(ctx, sess, c, nil), true
		unlock()
	}
	x.finish(ctx, sess, c, res, start, started, true)
	return nil
}

// notifyFinished tells waiters on other replicas that a call which went through an
// approval has its result.
func (x *Executor) notifyFinished(ctx context.Context, c *Call) {
	if x.perm != nil && c.approved {
		_ = x.perm.Notifier.Notify(context.WithoutCancel(ctx), store.TopicCall, c.ID)
	}
}
