package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// ApprovalStore is what the approvals API reads and decides.
type ApprovalStore interface {
	GetApproval(ctx context.Context, id string) (*store.Approval, error)
	ListApprovals(ctx context.Context, f store.ApprovalFilter) ([]*store.Approval, error)
	DecideApproval(ctx context.Context, id string, d store.ApprovalDecision) (*store.Approval, error)
}

// Approvals wires the approvals API; nil disables it (every call is allowed).
type Approvals struct {
	Store    ApprovalStore
	Notifier session.Notifier
	// Answers finishes calls of external tools waiting for their answer.
	Answers interface {
		AnswerCall(ctx context.Context, id string, result *tool.Result, at time.Time) error
	}
	// RunGrace is how long after an approval the deciding replica leaves the call to
	// a live waiter (whose stream shows its progress) before running it itself.
	RunGrace time.Duration
}

type approvalJSON struct {
	ID          string          `json:"id"`
	SessionID   string          `json:"session_id"`
	CallID      string          `json:"call_id"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	Risk        tool.Risk       `json:"risk"`
	Reason      string          `json:"reason"`
	Suggestions []string        `json:"suggestions"`
	Status      string          `json:"status"`
	Decision    *decisionJSON   `json:"decision"`
	CreatedAt   time.Time       `json:"created_at"`
	ExpiresAt   *time.Time      `json:"expires_at"`
	DecidedAt   *time.Time      `json:"decided_at"`
}

type decisionJSON struct {
	Kind     string `json:"kind"`
	Rule     string `json:"rule,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Actor    string `json:"actor"`
	ByPolicy bool   `json:"by_policy"`
}

// ApprovalJSON is an approval as the API shows it (the Approval schema of
// api/openapi.yaml), for other outputs of the daemon (webhooks).
func ApprovalJSON(a *store.Approval) any { return toApprovalJSON(a) }

func toApprovalJSON(a *store.Approval) approvalJSON {
	out := approvalJSON{ID: a.ID, SessionID: a.SessionID, CallID: a.CallID, Tool: a.Tool, Arguments: a.Arguments,
		Risk: a.Risk, Reason: a.Reason, Suggestions: suggestionsOf(a), Status: string(a.StatusAt(time.Now())),
		CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt, DecidedAt: a.DecidedAt}
	if a.Decision != nil {
		out.Decision = &decisionJSON{Kind: a.Decision.Kind, Rule: a.Decision.Rule, Reason: a.Decision.Reason, Actor: a.Decision.Actor,
			ByPolicy: session.DeniedByPolicy(a.Decision)}
	}
	return out
}

func suggestionsOf(a *store.Approval) []string {
	var s []string
	_ = json.Unmarshal(a.Suggestions, &s)
	if s == nil {
		s = []string{}
	}
	return s
}

// approvalEvent is the approval_required line of a stream.
type approvalEvent struct {
	Type       string  `json:"type"`
	ToolCallID string  `json:"tool_call_id"`
	CallID     string  `json:"call_id"`
	Name       string  `json:"name"`
	Approval   any     `json:"approval"`
	TS         float64 `json:"ts"`
}

func toApprovalEvent(ev session.Event) approvalEvent {
	a := toApprovalJSON(ev.Approval)
	a.Suggestions = ev.Suggestions
	if a.Suggestions == nil {
		a.Suggestions = []string{}
	}
	return approvalEvent{Type: string(ev.Type), ToolCallID: ev.Call.ToolCallID, CallID: ev.Call.ID, Name: ev.Call.Name,
		Approval: map[string]any{"id": a.ID, "risk": a.Risk, "reason": a.Reason, "suggestions": a.Suggestions, "expires_at": a.ExpiresAt},
		TS:       unixSeconds(ev.TS)}
}

// listApprovals lists approvals, newest first. With wait, an empty answer is held
// until one appears (or the wait ends): approvers' consoles long-poll this.
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	if s.Approvals == nil {
		s.writeError(w, r, errorf(CodeNotFound, "approvals are not enabled"))
		return
	}
	q := r.URL.Query()
	f := store.ApprovalFilter{Tenant: tenantOf(r), Status: store.ApprovalStatus(q.Get("status")), SessionID: q.Get("session_id"),
		CallID: q.Get("call_id"), Limit: 100,
		MaxBytes: s.cfg.ListBytes}
	if f.Status != "" && !f.Status.Valid() {
		s.writeError(w, r, errorf(CodeBadRequest, "status must be pending, approved, denied or expired"))
		return
	}
	n, err := queryLimit(q, f.Limit, 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.Limit = n
	if v := q.Get("before"); v != "" {
		l := listing{noun: "approval", prefix: "apr_", find: func(ctx context.Context, id string) (time.Time, error) {
			a, err := s.Approvals.Store.GetApproval(ctx, id)
			if err == nil && a.Tenant != f.Tenant {
				err = store.ErrNotFound // as unknown as one never made
			}
			if err != nil {
				return time.Time{}, err
			}
			return a.CreatedAt, nil
		}}
		at, id, err := l.before(r.Context(), v)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		f.Before, f.BeforeID = at, id
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 2*time.Minute {
			s.writeError(w, r, errorf(CodeBadRequest, "wait must be a duration up to 2m, such as 30s"))
			return
		}
		wait = d
	}
	var wake <-chan string
	if wait > 0 {
		created, stop := s.Approvals.Notifier.Subscribe(session.TopicApprovalCreated)
		defer stop()
		decided, stop2 := s.Approvals.Notifier.Subscribe(store.TopicApproval)
		defer stop2()
		wake = merge(r.Context(), created, decided)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		f.Now = time.Now()
		list, err := s.Approvals.Store.ListApprovals(r.Context(), f)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if len(list) > 0 || wait == 0 {
			out := make([]approvalJSON, len(list))
			for i, a := range list {
				out[i] = toApprovalJSON(a)
			}
			resp := map[string]any{"approvals": out}
			cut := store.ApprovalsCut(list, f.MaxBytes)
			if cut {
				resp["truncated"] = true // ask for fewer (limit), or page with before
			}
			if wantNext(len(list), f.Limit, cut) {
				last := list[len(list)-1]
				resp["next_before"] = nextBefore(last.ID, last.CreatedAt)
			}
			writeJSON(w, http.StatusOK, resp)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-deadline.C:
			wait = 0 // answer with what there is (nothing)
		case <-s.stopping():
			wait = 0 // the daemon stops: answer now, not at the drain deadline
		}
	}
}

func merge(ctx context.Context, chans ...<-chan string) <-chan string {
	out := make(chan string, 1)
	for _, ch := range chans {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case v, ok := <-ch:
					if !ok {
						return
					}
					select {
					case out <- v:
					default:
					}
				}
			}
		}()
	}
	return out
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	a, err := s.approval(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toApprovalJSON(a))
}

func (s *Server) approval(r *http.Request) (*store.Approval, error) {
	if s.Approvals == nil {
		return nil, errorf(CodeNotFound, "approvals are not enabled")
	}
	a, err := s.Approvals.Store.GetApproval(r.Context(), pathParam(r, "approvalID"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && a.Tenant != tenantOf(r)) {
		return nil, errorf(CodeNotFound, "approval not found")
	}
	return a, err
}

type decisionRequest struct {
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
	Reason   string `json:"reason"`
	Actor    string `json:"actor"`
}

// decideApproval records a person's decision. Approving "for session" adds the
// approval's suggested rules to the session, "with rule" the one chosen; a denial's
// reason reaches the model in a denied result. The call then runs exactly once: on
// the replica whose stream waits for it or, if none claims it, here.
func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request) {
	var req decisionRequest
	if err := decodeJSONOnce(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkDecisionText(req); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.approval(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var rules []string
	switch req.Decision {
	case store.DecisionApprove, store.DecisionDeny, store.DecisionApproveForSession:
		// Dropping it would leave a record naming a rule the session never got.
		if req.Rule != "" {
			s.writeError(w, r, errorf(CodeBadRequest, "rule goes with approve_with_rule only; "+req.Decision+" takes none"))
			return
		}
		if req.Decision == store.DecisionApproveForSession {
			rules = suggestionsOf(a)
			if len(rules) == 0 {
				s.writeError(w, r, errorf(CodeBadRequest, "this request has no suggested rules (what it asks about cannot be allowed by a rule); use approve"))
				return
			}
		}
	case store.DecisionApproveWithRule:
		if !slices.Contains(suggestionsOf(a), req.Rule) {
			s.writeError(w, r, errorf(CodeBadRequest, "rule must be one of the suggestions: "+jsonString(suggestionsOf(a))))
			return
		}
		rules = []string{req.Rule}
	default:
		s.writeError(w, r, errorf(CodeBadRequest, "decision must be approve, approve_for_session, approve_with_rule or deny"))
		return
	}
	// The audit trail names the key that decided; a client-sent actor (the person
	// behind a shared UI key) goes with it, never instead of it.
	actor := actorOf(r, req.Actor)
	if req.Decision != store.DecisionDeny && s.Exec != nil && s.Sessions != nil {
		// A deny rule added while the call waited (loaded by a restart) wins over a
		// person's approval: the request is denied in the rule's name instead.
		denied, why, err := s.Exec.DeniedNow(r.Context(), s.Sessions, a.CallID)
		if err != nil {
			// Fail closed: an approval the rules were not checked against is not
			// applied. The request stays pending for a retry or a denial.
			s.policyUnchecked(w, r, a, err)
			return
		}
		if denied {
			s.denyByPolicy(w, r, a, actor, why)
			return
		}
	}
	d := store.ApprovalDecision{Kind: req.Decision, Rule: req.Rule, Reason: req.Reason, Actor: actor}
	if req.Decision == store.DecisionApproveForSession {
		d.Rules = rules // audited: which rules the session got
	}
	if req.Decision == store.DecisionDeny {
		// The model reads who denied as the client named them (the person behind a
		// shared UI key), never the key: that is for the audit trail.
		by := req.Actor
		if by == "" {
			by = "the approver"
		}
		d.Result = store.DeniedResult(by, req.Reason)
	}
	if len(rules) > 0 {
		// The rules are written in the decision's transaction: a decision whose rules
		// cannot be saved fails whole (the request stays pending and may be decided
		// again), never approving "for session" a session that did not get them.
		if d.SessionSpec, err = session.AddRules(rules); err != nil {
			s.writeError(w, r, errorf(CodeBadRequest, "the rules cannot be added: "+err.Error()))
			return
		}
	}
	decided, err := s.Approvals.Store.DecideApproval(r.Context(), a.ID, d)
	if errors.Is(err, store.ErrConflict) && sameDecision(decided, d) {
		// The same approver sending the same decision again (its answer was lost on
		// the way): what it asked for is done.
		writeJSON(w, http.StatusOK, toApprovalJSON(decided))
		return
	}
	if errors.Is(err, store.ErrConflict) {
		s.writeError(w, r, errorf(CodeConflict, decidedAlready(decided)))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(rules) > 0 {
		// Stored already; this replica's copy of the session follows, and the others
		// are told (each also reads the stored spec before the session's next use).
		if err := s.Sessions.SpecChanged(context.WithoutCancel(r.Context()), decided.SessionID); err != nil {
			s.log.WarnContext(r.Context(), "reading a session's rules after an approval added them", "approval_id", a.ID, "err", err)
		}
	}
	bg := context.WithoutCancel(r.Context())
	s.afterDecision(bg, decided)
	if len(rules) > 0 {
		// Other requests of the session waiting meanwhile (the rest of a parallel
		// batch) that the new rules cover need no decision of their own.
		go s.approveCovered(bg, decided)
	}
	writeJSON(w, http.StatusOK, toApprovalJSON(decided))
}

// denyByPolicy answers an approval of a call the policy now denies: the request is
// denied, saying so to the model, and the approver gets a 409 that says why.
func (s *Server) denyByPolicy(w http.ResponseWriter, r *http.Request, a *store.Approval, actor, why string) {
	d := session.PolicyDenial(actor, why)
	decided, err := s.Approvals.Store.DecideApproval(r.Context(), a.ID, d)
	if errors.Is(err, store.ErrConflict) {
		s.writeError(w, r, errorf(CodeConflict, decidedAlready(decided)))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.afterDecision(context.WithoutCancel(r.Context()), decided)
	s.writeError(w, r, errorf(CodeConflict, "the call was not approved: "+d.Reason+"; the request is denied"))
}

// policyUnchecked answers an approval whose call the policy could not be checked
// against (its session or call record could not be read): 503, nothing decided.
func (s *Server) policyUnchecked(w http.ResponseWriter, r *http.Request, a *store.Approval, err error) {
	if clientGone(r, err) {
		s.writeError(w, r, err)
		return
	}
	s.log.ErrorContext(r.Context(), "approving a call: the policy could not be checked against it", "approval_id", a.ID, "call_id", a.CallID,
		"err", err, "request_id", requestID(r.Context()))
	w.Header().Set("Retry-After", "5")
	s.writeError(w, r, errorf(CodeUnavailable, "the approval was not applied: the policy's rules could not be checked against the call just now (request id "+
		requestID(r.Context())+"); nothing was decided and the request is still pending: try again shortly, or deny it"))
}

// afterDecision wakes the call's waiters and, for an approval, runs the call here
// unless a waiting stream claims it first.
func (s *Server) afterDecision(ctx context.Context, decided *store.Approval) {
	_ = s.Approvals.Notifier.Notify(ctx, store.TopicApproval, decided.ID)
	if decided.Status == store.ApprovalApproved {
		go func() {
			time.Sleep(s.Approvals.RunGrace)
			if err := s.Exec.RunApproved(ctx, s.Sessions, decided.CallID); err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, session.ErrShuttingDown) {
				s.log.Error("running an approved call failed", "call_id", decided.CallID, "err", err)
			}
		}()
	} else {
		_ = s.Approvals.Notifier.Notify(ctx, store.TopicCall, decided.CallID)
	}
}

// approveCovered approves the pending requests of first's session that the rules
// first added now allow, in the name of first's approver, each saying which rule.
func (s *Server) approveCovered(ctx context.Context, first *store.Approval) {
	list, err := s.Approvals.Store.ListApprovals(ctx, store.ApprovalFilter{Tenant: first.Tenant, SessionID: first.SessionID,
		Status: store.ApprovalPending, Now: time.Now(), Limit: 1000})
	if err != nil {
		s.log.Warn("listing a session's pending approvals after rules were added", "session_id", first.SessionID, "err", err)
		return
	}
	for _, a := range list {
		if a.ID == first.ID {
			continue
		}
		ok, why, err := s.Exec.AllowedNow(ctx, s.Sessions, a.CallID)
		if err != nil {
			s.log.Warn("checking a pending approval against new session rules", "approval_id", a.ID, "err", err)
			continue
		}
		if !ok {
			continue
		}
		actor := "the approver"
		if first.Decision != nil {
			actor = first.Decision.Actor
		}
		d := store.ApprovalDecision{Kind: store.DecisionApprove, Actor: actor,
			Reason: fmt.Sprintf("%s, added when %s was approved for the session", why, first.ID)}
		decided, err := s.Approvals.Store.DecideApproval(ctx, a.ID, d)
		if err != nil {
			continue // decided or expired meanwhile, or the store is away: a person still can
		}
		s.log.Info("approved by a rule approved for the session", "approval_id", a.ID, "by_approval", first.ID, "call_id", a.CallID)
		s.afterDecision(ctx, decided)
	}
}

// Bounds of a decision's text. The reason and actor are stored with the approval,
// in the denied call's result and in the audit log (never deleted), are listed by
// GET /v1/approvals and /v1/audit, and the model reads them ("denied by <actor>:
// <reason>"): a note of a few paragraphs and a person's name, not megabytes, and no
// escapes that garble a terminal or a log.
const (
	maxDecisionReason = 4096 // bytes
	maxDecisionActor  = 200  // bytes, as a key's name
)

// checkDecisionText refuses a decision whose reason, actor or rule is out of bounds,
// saying which and why.
func checkDecisionText(req decisionRequest) error {
	var problems []string
	// A text too long says by how much: the approver shortens it once, not by trial.
	size := func(s string, most int) string {
		if len(s) <= most {
			return ""
		}
		return fmt.Sprintf(" (this one has %d bytes)", len(s))
	}
	if len(req.Reason) > maxDecisionReason || strings.IndexFunc(req.Reason, func(c rune) bool {
		return unicode.IsControl(c) && c != '\n' && c != '\r' && c != '\t'
	}) >= 0 {
		problems = append(problems, fmt.Sprintf("reason: at most %d bytes%s, no control characters but tabs and line breaks", maxDecisionReason, size(req.Reason, maxDecisionReason)))
	}
	if len(req.Actor) > maxDecisionActor || hasControl(req.Actor) {
		problems = append(problems, fmt.Sprintf("actor: at most %d bytes%s, no control characters (a person's name)", maxDecisionActor, size(req.Actor, maxDecisionActor)))
	}
	if strings.IndexByte(req.Rule, 0) >= 0 {
		problems = append(problems, "rule: no NUL character (pick one of the request's suggestions)")
	}
	if len(problems) > 0 {
		return errorf(CodeBadRequest, strings.Join(problems, "; "))
	}
	return nil
}

// sameDecision reports whether a was decided as d asks, by d's actor: a retry.
func sameDecision(a *store.Approval, d store.ApprovalDecision) bool {
	return a != nil && a.Decision != nil && a.Decision.Kind == d.Kind && a.Decision.Actor == d.Actor &&
		a.Decision.Rule == d.Rule && a.Decision.Reason == d.Reason && a.Decision.ByPolicy == d.ByPolicy
}

// decidedAlready tells an approver why their decision came too late: who decided
// first (racing approvers) and, for the daemon itself, why; or that nobody did in time.
func decidedAlready(a *store.Approval) string {
	switch {
	case a == nil:
		return "the request was already decided"
	case a.Status == store.ApprovalExpired:
		msg := "the request expired before anyone decided it"
		if a.ExpiresAt != nil {
			msg += " (at " + a.ExpiresAt.UTC().Format(time.RFC3339) + ")"
		}
		return msg + ": its call was not run, and the model was told so; the agent must make the call again to ask anew"
	case a.Decision != nil && a.Decision.Actor == store.AuditActorSystem && a.Decision.Reason != "":
		// Withdrawn by the daemon (its call cancelled, its client gone): "system"
		// alone does not say what happened.
		return "the request was already decided: " + string(a.Status) + " by " + a.Decision.Actor + " (" + a.Decision.Reason + ")"
	case a.Status == store.ApprovalDenied && session.DeniedByPolicy(a.Decision):
		// The actor approved; the policy denied (denyByPolicy).
		return "the request was already decided: denied by the policy when " + a.Decision.Actor + " approved it (" + a.Decision.Reason + ")"
	case a.Decision != nil:
		return "the request was already decided: " + string(a.Status) + " by " + a.Decision.Actor
	}
	return "the request was already decided (" + string(a.Status) + ")"
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
