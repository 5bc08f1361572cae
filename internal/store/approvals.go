package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// ApprovalStatus is where an approval request is in its life.
type ApprovalStatus string

const (
	ApprovalPending  ApprovalStatus = "pending"  // waiting for a person
	ApprovalApproved ApprovalStatus = "approved" // the call may be claimed and run
	ApprovalDenied   ApprovalStatus = "denied"   // the call was finished as failed (denied)
	ApprovalExpired  ApprovalStatus = "expired"  // nobody decided in time; the call was finished as failed (denied)
)

// Valid reports whether s is one of the known statuses.
func (s ApprovalStatus) Valid() bool {
	switch s {
	case ApprovalPending, ApprovalApproved, ApprovalDenied, ApprovalExpired:
		return true
	}
	return false
}

// Decision kinds (ApprovalDecision.Kind). Every kind but DecisionDeny approves the call;
// what "for session" and "with rule" add (a session rule) is the caller's business.
const (
	DecisionApprove           = "approve"
	DecisionApproveForSession = "approve_for_session"
	DecisionApproveWithRule   = "approve_with_rule" // Rule must be set
	DecisionDeny              = "deny"
)

// Audit actions written by the store itself. Other components may append their own.
const (
	AuditApprovalRequested = "approval.requested" // CreateApproval; actor "system"
	AuditApprovalApproved  = "approval.approved"  // DecideApproval, any approving kind
	AuditApprovalDenied    = "approval.denied"    // DecideApproval, kind deny
	AuditApprovalExpired   = "approval.expired"   // ExpireApprovals or a late decision; actor "system"
)

// AuditActorSystem is the actor of entries the store writes on its own.
const AuditActorSystem = "system"

// ErrApprovalExpired is DecideApproval's answer when the decision came too late and
// expired the request itself: exactly one of the calls that expire a request (this
// decision, another, ExpireApprovals) reports it, the others see it expired. It is an
// ErrConflict.
var ErrApprovalExpired = fmt.Errorf("approval request expired: %w", ErrConflict)

// Approval is a durable request for a person to allow one tool call.
type Approval struct {
	ID          string // apr_…
	Tenant      string // "" in CreateApproval: the call's tenant
	SessionID   string // "" in CreateApproval: the call's session
	CallID      string // the tool_calls id (tc_…)
	Tool        string // "" in CreateApproval: the call's name
	Arguments   json.RawMessage
	Risk        tool.Risk
	Reason      string          // why the policy asked
	Suggestions json.RawMessage // rules the approver may pick, as the policy proposed them
	Status      ApprovalStatus
	Decision    *ApprovalDecision // nil while pending and for an expired approval
	CreatedAt   time.Time
	ExpiresAt   *time.Time // nil: never expires
	DecidedAt   *time.Time // when it was decided or marked expired
}

// ApprovalDecision is what a person decided. At is stored as the approval's DecidedAt.
type ApprovalDecision struct {
	Kind string // Decision…
	Rule string // the rule added by approve_with_rule
	// Rules are the rules approve_for_session added to the session (its request's
	// suggestions), named in the audit entry, which outlives the approval. Not stored
	// with the approval, which holds them as its suggestions.
	Rules  []string
	Reason string
	Actor  string // who decided; required
	// ByPolicy, for a deny, says that the policy denied the call when Actor approved
	// it (a deny rule loaded since the request was made): stored with the decision,
	// so that a person's denial is never taken for the policy's by its reason.
	ByPolicy bool
	At       time.Time
	// Result, for a deny, is the result its call is finished with instead of
	// DeniedResult(Actor, Reason): a deny by the system on the call's behalf (a call
	// cancelled while it waited) says why, and a person's names them as the model
	// should read it, not by the API key Actor records. It is not part of the stored
	// decision.
	Result *tool.Result
	// SessionSpec, when set, changes the spec of the approval's session in the
	// decision's transaction: the spec becomes what it returns given the stored one
	// (an approval "for session" adding its rules). Its error, or a failure to write
	// the spec, fails the decision, which then changes nothing; so a session has an
	// approval's rules exactly when the approval is decided. Not stored.
	SessionSpec func(spec json.RawMessage) (json.RawMessage, error)
}

// changeSpec is the new spec SessionSpec makes of spec, checked.
func (d ApprovalDecision) changeSpec(spec json.RawMessage) (json.RawMessage, error) {
	changed, err := d.SessionSpec(spec)
	if err != nil {
		return nil, err
	}
	if len(changed) == 0 || !json.Valid(changed) {
		return nil, fmt.Errorf("the changed spec is not valid JSON: %w", ErrInvalid)
	}
	return changed, nil
}

// ApprovalFilter selects approvals for ListApprovals. Zero fields do not filter.
type ApprovalFilter struct {
	Tenant    string
	Status    ApprovalStatus
	SessionID string
	CallID    string // the approvals of one call (approvals_call_id_idx)
	// Limit caps the result; <= 0 means no limit.
	Limit int
	// Before pages backwards: only approvals created before it, or, when BeforeID is
	// set too, ordered before (Before, BeforeID) — pass the last row of a page.
	Before   time.Time
	BeforeID string
	// MaxBytes stops the listing once the approvals read hold this many bytes of
	// arguments (the one that passes it included); <= 0: no bound. ApprovalsCut
	// tells such a listing.
	MaxBytes int
	// Now, when set, is the time a pending approval expired by (its ExpiresAt at or
	// before Now, the sweep not yet past) is judged at: such an approval is listed as
	// expired (Status expired) and not as pending (Status pending). Zero: by the
	// stored status alone.
	Now time.Time
}

// listedStatus is the status a listing shows of a (StatusAt f.Now).
func (f ApprovalFilter) listedStatus(a *Approval) ApprovalStatus {
	if f.Now.IsZero() {
		return a.Status
	}
	return a.StatusAt(f.Now)
}

// StatusAt is a's status as a person deciding at t sees it: expired once it cannot
// be decided any more, even before the sweep marks it so.
func (a *Approval) StatusAt(t time.Time) ApprovalStatus {
	if expiredNow(a, t) {
		return ApprovalExpired
	}
	return a.Status
}

// full reports whether approvals holding n bytes of arguments reach f.MaxBytes.
func (f ApprovalFilter) full(n int) bool { return f.MaxBytes > 0 && n >= f.MaxBytes }

// ApprovalsCut reports whether a listing stopped at max bytes of arguments.
func ApprovalsCut(list []*Approval, max int) bool {
	n := 0
	for _, a := range list {
		n += len(a.Arguments)
	}
	return max > 0 && n >= max
}

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	ID      int64     // assigned by the store, increasing
	At      time.Time // the ts column; zero in AppendAudit: now
	Tenant  string
	Actor   string // required
	Action  string // required, e.g. AuditApprovalApproved
	Subject string // what it is about, e.g. an approval id
	Detail  json.RawMessage
}

// AuditFilter selects audit entries for ListAudit. Zero fields do not filter. Entries
// come newest first: At descending, then ID descending.
type AuditFilter struct {
	Tenant  string // "": every tenant's
	Action  string
	Subject string
	// ActionPrefix keeps the entries whose action starts with it: "approval." for a
	// reader who may see the approvals' story but not the administrative entries.
	ActionPrefix string
	// Before is the ID of the last entry of the previous page: only entries after it
	// in that order (older) are listed. The log is never deleted from, so a cursor
	// always names an entry the store has (of Tenant, when that is set: another
	// tenant's is ErrNotFound); 0: from the newest.
	Before int64
	Limit  int // <= 0: no limit
}

// ApprovalStore is the durable side of approvals: SQLite and Postgres implement it. It is
// declared here to document the contract; consumers declare the small part they use.
//
// Every write is one transaction, so that an approval (and its effect on the call) is
// durable before anyone is told about it, and so that of concurrent deciders or claimers
// exactly one wins.
type ApprovalStore interface {
	// CreateApproval inserts a as pending and, in the same transaction, moves its call
	// from pending or running to waiting and appends AuditApprovalRequested (actor
	// "system"). Unknown call: ErrNotFound. Call in another state, or approval id taken:
	// ErrConflict. Approval naming another session or tenant than its call: ErrInvalid.
	// Empty Tenant, SessionID and Tool are taken from the call; they, Status and a zero
	// CreatedAt (now) are written back into a. Nothing is written on error.
	CreateApproval(ctx context.Context, a *Approval) error
	// GetApproval returns ErrNotFound for an unknown id.
	GetApproval(ctx context.Context, id string) (*Approval, error)
	// ListApprovals returns matching approvals, newest first (ties: id descending);
	// never nil.
	ListApprovals(ctx context.Context, f ApprovalFilter) ([]*Approval, error)
	// DecideApproval decides a pending approval whose ExpiresAt is after d.At (zero:
	// now), in one transaction with its follow-up and an audit entry (actor d.Actor):
	// an approving kind makes it approved and leaves the call waiting for ClaimCall;
	// deny makes it denied and finishes the call, if still waiting, as failed with a
	// KindDenied result "denied by <actor>: <reason>", or with d.Result when set. It
	// returns the decided approval.
	//
	// Refusals: unknown id, ErrNotFound. No longer pending: ErrConflict, returned WITH
	// the approval as it is (who decided what). Pending but expired at d.At: the
	// approval is expired exactly as ExpireApprovals would (committed), and the answer
	// is ErrApprovalExpired (an ErrConflict) with the expired approval. Of concurrent
	// deciders exactly one wins.
	DecideApproval(ctx context.Context, id string, d ApprovalDecision) (*Approval, error)
	// ClaimCall moves a waiting call to running on owner (StartedAt at; zero: now) if no
	// approval of the call is anything but approved: it was approved, or it never
	// needed one (an external tool's answer). One conditional UPDATE: of concurrent
	// claimers, on any replica, exactly one gets nil. Not waiting (claimed, finished),
	// or an approval pending, denied or expired: ErrConflict. Unknown: ErrNotFound.
	ClaimCall(ctx context.Context, callID, owner string, at time.Time) error
	// ApprovedUnclaimed returns the ids of calls still waiting although an approval
	// approved them at or before decidedBefore, and none of their approvals is anything
	// but approved: approved calls nobody claimed (the decider stopped or died before
	// running it). Oldest first, at most limit (<= 0: 100). ClaimCall still decides
	// who runs each.
	ApprovedUnclaimed(ctx context.Context, decidedBefore time.Time, limit int) ([]string, error)
	// ExpireApprovals, in one transaction, marks every pending approval whose ExpiresAt
	// is not after now expired (DecidedAt now, no Decision), finishes each one's call,
	// if still waiting, as failed with a KindDenied result (expiredResult: not run, the
	// request expired), and appends AuditApprovalExpired (actor "system") for each. It
	// returns the approvals it expired, as they now are: of concurrent
	// callers, on any replica, exactly one returns each. A zero now is the current time.
	ExpireApprovals(ctx context.Context, now time.Time) ([]*Approval, error)
	// AppendAudit appends e, writing its ID (and a zero At, set to now) back into e.
	AppendAudit(ctx context.Context, e *AuditEntry) error
	// ListAudit returns the entries f selects, newest first (see AuditFilter); never
	// nil. A cursor (f.Before) that names no entry: ErrNotFound.
	ListAudit(ctx context.Context, f AuditFilter) ([]*AuditEntry, error)
}

var (
	_ ApprovalStore = (*SQLite)(nil)
	_ ApprovalStore = (*Postgres)(nil)
)

// prepareApproval validates a new approval, sets it pending and fills a zero CreatedAt.
func prepareApproval(a *Approval) error {
	if a == nil {
		return fmt.Errorf("nil approval: %w", ErrInvalid)
	}
	if a.ID == "" {
		return fmt.Errorf("approval id is empty: %w", ErrInvalid)
	}
	if a.CallID == "" {
		return fmt.Errorf("approval %s: call id is empty: %w", a.ID, ErrInvalid)
	}
	if a.Status != "" && a.Status != ApprovalPending {
		return fmt.Errorf("approval %s: a new approval is pending, not %q: %w", a.ID, a.Status, ErrInvalid)
	}
	if a.Decision != nil || a.DecidedAt != nil {
		return fmt.Errorf("approval %s: a new approval has no decision: %w", a.ID, ErrInvalid)
	}
	if a.Risk != "" && !a.Risk.Valid() {
		return fmt.Errorf("approval %s: unknown risk %q: %w", a.ID, a.Risk, ErrInvalid)
	}
	if err := checkJSON("approval "+a.ID+": arguments", a.Arguments); err != nil {
		return err
	}
	if err := checkJSON("approval "+a.ID+": suggestions", a.Suggestions); err != nil {
		return err
	}
	a.Status = ApprovalPending
	if a.CreatedAt.IsZero() {
		a.CreatedAt = now()
	}
	return nil
}

// adoptCall fills the approval's empty session, tenant and tool from its call and
// refuses an approval that names another session or tenant than its call.
func adoptCall(a *Approval, sessionID, tenant, name string) error {
	if a.SessionID == "" {
		a.SessionID = sessionID
	} else if a.SessionID != sessionID {
		return fmt.Errorf("approval %s: session %q, but call %s is in session %q: %w", a.ID, a.SessionID, a.CallID, sessionID, ErrInvalid)
	}
	if a.Tenant == "" {
		a.Tenant = tenant
	} else if a.Tenant != tenant {
		return fmt.Errorf("approval %s: tenant %q, but call %s belongs to %q: %w", a.ID, a.Tenant, a.CallID, tenant, ErrInvalid)
	}
	if a.Tool == "" {
		a.Tool = name
	}
	return nil
}

// prepareDecision validates d and fills a zero At with the current time.
func prepareDecision(d *ApprovalDecision) error {
	switch d.Kind {
	case DecisionApprove, DecisionApproveForSession, DecisionDeny:
	case DecisionApproveWithRule:
		if d.Rule == "" {
			return fmt.Errorf("decision %s needs a rule: %w", d.Kind, ErrInvalid)
		}
	default:
		return fmt.Errorf("unknown decision kind %q: %w", d.Kind, ErrInvalid)
	}
	if d.Actor == "" {
		return fmt.Errorf("decision has no actor: %w", ErrInvalid)
	}
	if d.Result != nil {
		if d.Kind != DecisionDeny || !d.Result.IsError {
			return fmt.Errorf("decision %s: only a deny finishes its call, with an error result: %w", d.Kind, ErrInvalid)
		}
		if err := checkResult(d.Result); err != nil {
			return fmt.Errorf("decision result: %w", err)
		}
	}
	if d.At.IsZero() {
		d.At = now()
	}
	return nil
}

// decisionStatus is the status a decision moves an approval to.
func decisionStatus(d ApprovalDecision) ApprovalStatus {
	if d.Kind == DecisionDeny {
		return ApprovalDenied
	}
	return ApprovalApproved
}

// deniedResult is the result a denied call is finished with.
func deniedResult(d ApprovalDecision) *tool.Result {
	if d.Result != nil {
		return d.Result
	}
	return DeniedResult(d.Actor, d.Reason)
}

// DeniedResult is the result of a call that by (who denied it, as the model should
// read it) denied, with their reason if they gave one.
func DeniedResult(by, reason string) *tool.Result {
	if reason == "" {
		return tool.ErrorResult(tool.KindDenied, "denied by %s", by)
	}
	return tool.ErrorResult(tool.KindDenied, "denied by %s: %s", by, reason)
}

// expiredResult is the result a call whose approval expired is finished with.
func expiredResult() *tool.Result {
	return tool.ErrorResult(tool.KindDenied, "not run: its approval request expired before anyone decided it; make the call again when someone can approve it, or ask the user")
}

// decisionJSON is the decision column; At lives in decided_at.
// A decision recorded before by_policy was stored reads as a person's (false).
type decisionJSON struct {
	Kind     string `json:"kind"`
	Rule     string `json:"rule,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Actor    string `json:"actor"`
	ByPolicy bool   `json:"by_policy,omitempty"`
}

// aprMarshal encodes v without HTML escaping, like encodeResult.
func aprMarshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func encodeDecision(d ApprovalDecision) ([]byte, error) {
	return aprMarshal(decisionJSON{Kind: d.Kind, Rule: d.Rule, Reason: d.Reason, Actor: d.Actor, ByPolicy: d.ByPolicy})
}

func decodeDecision(b []byte, decidedAt *time.Time) (*ApprovalDecision, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var j decisionJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, err
	}
	d := &ApprovalDecision{Kind: j.Kind, Rule: j.Rule, Reason: j.Reason, Actor: j.Actor, ByPolicy: j.ByPolicy}
	if decidedAt != nil {
		d.At = *decidedAt
	}
	return d, nil
}

// auditedDecision is the decision as stored with the rules d added to the session,
// which its audit entry names and the approval does not store.
func auditedDecision(stored *ApprovalDecision, d ApprovalDecision) *ApprovalDecision {
	if stored == nil || len(d.Rules) == 0 {
		return stored
	}
	c := *stored
	c.Rules = d.Rules
	return &c
}

// approvalAudit is the audit entry for an approval event.
func approvalAudit(a *Approval, action, actor string, at time.Time, d *ApprovalDecision) (*AuditEntry, error) {
	detail := struct {
		CallID    string    `json:"call_id"`
		SessionID string    `json:"session_id"`
		Tool      string    `json:"tool"`
		Risk      tool.Risk `json:"risk,omitempty"`
		Kind      string    `json:"kind,omitempty"`
		Rule      string    `json:"rule,omitempty"`
		Rules     []string  `json:"rules,omitempty"`
		Reason    string    `json:"reason,omitempty"`
		ByPolicy  bool      `json:"by_policy,omitempty"`
	}{CallID: a.CallID, SessionID: a.SessionID, Tool: a.Tool, Risk: a.Risk}
	switch {
	case d != nil:
		detail.Kind, detail.Rule, detail.Rules, detail.Reason, detail.ByPolicy = d.Kind, d.Rule, d.Rules, d.Reason, d.ByPolicy
	case action == AuditApprovalRequested:
		detail.Reason = a.Reason
	}
	b, err := aprMarshal(detail)
	if err != nil {
		return nil, err
	}
	return &AuditEntry{At: at, Tenant: a.Tenant, Actor: actor, Action: action, Subject: a.ID, Detail: b}, nil
}

// prepareAudit validates e and fills a zero At with the current time.
func prepareAudit(e *AuditEntry) error {
	if e == nil {
		return fmt.Errorf("nil audit entry: %w", ErrInvalid)
	}
	if e.Actor == "" || e.Action == "" {
		return fmt.Errorf("audit entry needs an actor and an action (got %q, %q): %w", e.Actor, e.Action, ErrInvalid)
	}
	if err := checkJSON("audit detail", e.Detail); err != nil {
		return err
	}
	if e.At.IsZero() {
		e.At = now()
	}
	return nil
}

func checkApprovalFilter(f ApprovalFilter) error {
	if f.Status != "" && !f.Status.Valid() {
		return fmt.Errorf("unknown approval status %q: %w", f.Status, ErrInvalid)
	}
	if f.BeforeID != "" && f.Before.IsZero() {
		return fmt.Errorf("approval filter: BeforeID without Before: %w", ErrInvalid)
	}
	return nil
}

// expiredNow reports whether a pending approval can no longer be decided at t.
func expiredNow(a *Approval, t time.Time) bool {
	return a.Status == ApprovalPending && a.ExpiresAt != nil && !a.ExpiresAt.After(utcMicro(t))
}

// approvedUnclaimedQuery is ApprovedUnclaimed's query in either dialect, given its two
// placeholders (the cutoff, the limit). The status condition repeats the partial
// index's (tool_calls_tenant_active_idx) so that only active calls are read.
func approvedUnclaimedQuery(cutoff, limit string) string {
	return `SELECT c.id FROM tool_calls c
		WHERE c.status IN ('pending', 'running', 'waiting') AND c.status = 'waiting'
		AND EXISTS (SELECT 1 FROM approvals a WHERE a.call_id = c.id AND a.status = 'approved' AND a.decided_at <= ` + cutoff + `)
		AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.call_id = c.id AND a.status <> 'approved')
		ORDER BY c.created_at, c.id LIMIT ` + limit
}
