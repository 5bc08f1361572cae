package app

import (
	"context"
	"errors"
	"time"

	"github.com/toolserverd/toolserverd/internal/server"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/telemetry"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/webhook"
)

// approvalStore is what the executor, the approvals API and the expiry loop need of
// the store.
type approvalStore interface {
	session.ApprovalStore
	server.ApprovalStore
	ExpireApprovals(ctx context.Context, at time.Time) ([]*store.Approval, error)
	ApprovedUnclaimed(ctx context.Context, decidedBefore time.Time, limit int) ([]string, error)
	AnswerCall(ctx context.Context, id string, result *tool.Result, at time.Time) error
}

// observedApprovals times the approval store's operations and records each decision's
// latency, whoever decides (the REST API, an MCP client, the executor withdrawing).
// One time.Now pair per operation: negligible beside a transaction.
//
// It also counts the calls the store finishes when it denies or expires their
// request (see callFinished).
type observedApprovals struct {
	approvalStore
	ops       *telemetry.StoreMetrics
	approvals *telemetry.ApprovalMetrics
	calls     callCounter
}

// callCounter counts finished calls: the executor's observer (server.Metrics).
type callCounter interface {
	CallFinished(tool string, kind tool.ErrorKind, elapsed time.Duration, started bool)
}

func (o observedApprovals) CreateApproval(ctx context.Context, a *store.Approval) error {
	defer o.ops.Observe("create_approval", time.Now())
	return o.approvalStore.CreateApproval(ctx, a)
}

func (o observedApprovals) GetApproval(ctx context.Context, id string) (*store.Approval, error) {
	defer o.ops.Observe("get_approval", time.Now())
	return o.approvalStore.GetApproval(ctx, id)
}

func (o observedApprovals) ListApprovals(ctx context.Context, f store.ApprovalFilter) ([]*store.Approval, error) {
	defer o.ops.Observe("list_approvals", time.Now())
	return o.approvalStore.ListApprovals(ctx, f)
}

func (o observedApprovals) DecideApproval(ctx context.Context, id string, d store.ApprovalDecision) (*store.Approval, error) {
	start := time.Now()
	a, err := o.approvalStore.DecideApproval(ctx, id, d)
	o.ops.Observe("decide_approval", start)
	switch {
	case err == nil && a != nil && a.Decision != nil && a.DecidedAt != nil:
		o.approvals.Decided(a.Decision.Kind, a.CreatedAt, *a.DecidedAt)
		if a.Status == store.ApprovalDenied {
			kind := tool.KindDenied
			if d.Result != nil {
				kind = d.Result.ErrorKind
			}
			o.callFinished(a, kind)
		}
	case errors.Is(err, store.ErrApprovalExpired) && a != nil:
		o.callFinished(a, tool.KindDenied)
	}
	return a, err
}

func (o observedApprovals) ClaimCall(ctx context.Context, callID, owner string, at time.Time) error {
	defer o.ops.Observe("claim_call", time.Now())
	return o.approvalStore.ClaimCall(ctx, callID, owner, at)
}

func (o observedApprovals) GetCall(ctx context.Context, id string) (*store.Call, error) {
	defer o.ops.Observe("get_call", time.Now())
	return o.approvalStore.GetCall(ctx, id)
}

// AnswerCall counts the external tool's call it answers: the answer finishes the call
// in the store, exactly once, whether its stream still waited or went away before
// (the executor counts neither).
func (o observedApprovals) AnswerCall(ctx context.Context, id string, result *tool.Result, at time.Time) error {
	start := time.Now()
	err := o.approvalStore.AnswerCall(ctx, id, result, at)
	o.ops.Observe("answer_call", start)
	if err != nil || o.calls == nil {
		return err
	}
	c, gerr := o.approvalStore.GetCall(ctx, id)
	if gerr != nil {
		return nil // answered; only its count is lost
	}
	var kind tool.ErrorKind
	if result != nil && result.IsError {
		kind = result.ErrorKind
	}
	o.calls.CallFinished(c.Name, kind, at.Sub(c.CreatedAt), false)
	return nil
}

func (o observedApprovals) ExpireApprovals(ctx context.Context, at time.Time) ([]*store.Approval, error) {
	start := time.Now()
	expired, err := o.approvalStore.ExpireApprovals(ctx, at)
	o.ops.Observe("expire_approvals", start)
	for _, a := range expired {
		o.callFinished(a, tool.KindDenied)
	}
	return expired, err
}

// callFinished counts the call of a that the store has just finished, denying or
// expiring a (an expired request's call is finished as denied). A pending request's
// call waits, so the transaction that ends the request finishes the call, and exactly
// one does, on whichever replica: counting there counts each call once, whether its
// stream still waited or went away before (the executor counts neither:
// errFinishedElsewhere).
func (o observedApprovals) callFinished(a *store.Approval, kind tool.ErrorKind) {
	if o.calls == nil {
		return
	}
	var elapsed time.Duration // from the request, about when the call started
	if a.DecidedAt != nil {
		elapsed = a.DecidedAt.Sub(a.CreatedAt)
	}
	o.calls.CallFinished(a.Tool, kind, elapsed, false)
}

// countPending counts pending approvals of every tenant for the gauge: with a COUNT
// where the store has one (listing them read every request's arguments, megabytes
// each, at every scrape).
func countPending(s server.ApprovalStore) telemetry.PendingCounter {
	if c, ok := s.(interface {
		CountPendingApprovals(context.Context) (int, error)
	}); ok {
		return c.CountPendingApprovals
	}
	return func(ctx context.Context) (int, error) {
		list, err := s.ListApprovals(ctx, store.ApprovalFilter{Status: store.ApprovalPending})
		return len(list), err
	}
}

// notifiedApprovals sends the approval webhook's events: approval.requested when an
// approval is created, approval.approved or approval.denied when one is decided
// (by a person through the API or an MCP client, by a session rule approved for the
// session, by the system withdrawing it for a call that ended), approval.expired when
// one expires (the sweep, a waiting call's deadline, a decision that came too late:
// the store reports each expiry to exactly one of them). The payload is
// {"tenant", "approval": the API's Approval}; a requested one is read when the event
// is delivered.
type notifiedApprovals struct {
	approvalStore
	hook *webhook.Sender
}

func (n notifiedApprovals) CreateApproval(ctx context.Context, a *store.Approval) error {
	if err := n.approvalStore.CreateApproval(ctx, a); err != nil {
		return err
	}
	id := a.ID
	n.hook.Send(webhook.Event{Type: store.AuditApprovalRequested, Payload: func(ctx context.Context) (any, error) {
		got, err := n.approvalStore.GetApproval(ctx, id)
		if err != nil {
			return nil, err
		}
		return approvalPayload(got), nil
	}})
	return nil
}

func (n notifiedApprovals) DecideApproval(ctx context.Context, id string, d store.ApprovalDecision) (*store.Approval, error) {
	a, err := n.approvalStore.DecideApproval(ctx, id, d)
	if errors.Is(err, store.ErrApprovalExpired) && a != nil {
		n.send(store.AuditApprovalExpired, a)
	}
	if err != nil || a == nil {
		return a, err
	}
	typ := store.AuditApprovalApproved
	if a.Status == store.ApprovalDenied {
		typ = store.AuditApprovalDenied
	}
	n.send(typ, a)
	return a, nil
}

func (n notifiedApprovals) ExpireApprovals(ctx context.Context, at time.Time) ([]*store.Approval, error) {
	expired, err := n.approvalStore.ExpireApprovals(ctx, at)
	for _, a := range expired {
		n.send(store.AuditApprovalExpired, a)
	}
	return expired, err
}

// send sends an event about a as it is now.
func (n notifiedApprovals) send(typ string, a *store.Approval) {
	now := *a
	n.hook.Send(webhook.Event{Type: typ, Payload: func(context.Context) (any, error) { return approvalPayload(&now), nil }})
}

func approvalPayload(a *store.Approval) map[string]any {
	return map[string]any{"tenant": a.Tenant, "approval": server.ApprovalJSON(a)}
}
