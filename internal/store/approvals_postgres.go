package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// PostgreSQL runs these writes in READ COMMITTED transactions. Each state change is a
// conditional UPDATE of one row (WHERE status = …): a second writer blocks on the row
// lock, then re-evaluates the condition against the committed row and changes nothing.
// That is what makes "exactly one decider" and "exactly one claimer" hold across
// replicas without SERIALIZABLE retries.

const pgApprovalColumns = `id, tenant, session_id, call_id, tool, arguments, risk, reason, suggestions, status, decision, created_at, expires_at, decided_at`

func scanPGApproval(row pgx.Row) (*Approval, error) {
	var (
		a               Approval
		args, sugg, dec []byte
		risk, status    string
	)
	if err := row.Scan(&a.ID, &a.Tenant, &a.SessionID, &a.CallID, &a.Tool, &args, &risk, &a.Reason,
		&sugg, &status, &dec, &a.CreatedAt, &a.ExpiresAt, &a.DecidedAt); err != nil {
		return nil, err
	}
	a.Risk, a.Status = tool.Risk(risk), ApprovalStatus(status)
	if len(args) > 0 {
		a.Arguments = json.RawMessage(args)
	}
	if len(sugg) > 0 {
		a.Suggestions = json.RawMessage(sugg)
	}
	a.CreatedAt = a.CreatedAt.UTC()
	if a.ExpiresAt != nil {
		*a.ExpiresAt = a.ExpiresAt.UTC()
	}
	if a.DecidedAt != nil {
		*a.DecidedAt = a.DecidedAt.UTC()
	}
	var err error
	if a.Decision, err = decodeDecision(dec, a.DecidedAt); err != nil {
		return nil, fmt.Errorf("decision: %w", err)
	}
	return &a, nil
}

// pgExplainCall says why a conditional update of call id changed nothing.
func pgExplainCall(ctx context.Context, q auditPGQuerier, id string) error {
	var status string
	err := q.QueryRow(ctx, `SELECT status FROM tool_calls WHERE id = $1`, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("call %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("call %s: %w", id, err)
	}
	return fmt.Errorf("call %s is %s: %w", id, status, ErrConflict)
}

// CreateApproval implements ApprovalStore.CreateApproval.
func (p *Postgres) CreateApproval(ctx context.Context, a *Approval) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: create approval: %w", err)
	}
	if err := prepareApproval(a); err != nil {
		return fmt.Errorf("store: create approval: %w", err)
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store: create approval %s: begin: %w", a.ID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	var sessionID, tenant, name string
	err = tx.QueryRow(ctx, `UPDATE tool_calls SET status = 'waiting'
		WHERE id = $1 AND status IN ('pending', 'running') RETURNING session_id, tenant, name`, a.CallID,
	).Scan(&sessionID, &tenant, &name)
	if errors.Is(err, pgx.ErrNoRows) {
		err = pgExplainCall(ctx, tx, a.CallID)
	}
	if err != nil {
		return fmt.Errorf("store: create approval %s: %w", a.ID, err)
	}
	if err := adoptCall(a, sessionID, tenant, name); err != nil {
		return fmt.Errorf("store: create approval: %w", err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO approvals (`+pgApprovalColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', NULL, $10, $11, NULL)`,
		a.ID, a.Tenant, a.SessionID, a.CallID, a.Tool, rawJSON(a.Arguments), string(a.Risk), a.Reason,
		rawJSON(a.Suggestions), utcMicro(a.CreatedAt), utcMicroPtr(a.ExpiresAt))
	if isPGUniqueViolation(err) {
		return fmt.Errorf("store: create approval %s: already exists: %w", a.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("store: create approval %s: %w", a.ID, err)
	}
	e, err := approvalAudit(a, AuditApprovalRequested, AuditActorSystem, a.CreatedAt, nil)
	if err == nil {
		err = pgInsertAudit(ctx, tx, e)
	}
	if err != nil {
		return fmt.Errorf("store: create approval %s: audit: %w", a.ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("store: create approval %s: commit: %w", a.ID, err)
	}
	return nil
}

func (p *Postgres) GetApproval(ctx context.Context, id string) (*Approval, error) {
	a, err := scanPGApproval(p.pool.QueryRow(ctx, `SELECT `+pgApprovalColumns+` FROM approvals WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: get approval %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get approval %s: %w", id, err)
	}
	return a, nil
}

// ListApprovals returns the approvals matching f by created_at descending (ties: id
// descending). Nothing matching is an empty slice.
func (p *Postgres) ListApprovals(ctx context.Context, f ApprovalFilter) ([]*Approval, error) {
	if err := checkApprovalFilter(f); err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	var where []string
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	if f.Tenant != "" {
		where = append(where, "tenant = "+arg(f.Tenant))
	}
	switch {
	case !f.Now.IsZero() && f.Status == ApprovalPending:
		where = append(where, "status = 'pending' AND (expires_at IS NULL OR expires_at > "+arg(utcMicro(f.Now))+")")
	case !f.Now.IsZero() && f.Status == ApprovalExpired:
		where = append(where, "(status = 'expired' OR (status = 'pending' AND expires_at <= "+arg(utcMicro(f.Now))+"))")
	case f.Status != "":
		where = append(where, "status = "+arg(string(f.Status)))
	}
	if f.SessionID != "" {
		where = append(where, "session_id = "+arg(f.SessionID))
	}
	if f.CallID != "" {
		where = append(where, "call_id = "+arg(f.CallID))
	}
	switch {
	case f.BeforeID != "":
		where = append(where, "(created_at, id) < ("+arg(utcMicro(f.Before))+", "+arg(f.BeforeID)+")")
	case !f.Before.IsZero():
		where = append(where, "created_at < "+arg(utcMicro(f.Before)))
	}
	q := `SELECT ` + pgApprovalColumns + ` FROM approvals`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	var lim *int
	if f.Limit > 0 {
		lim = &f.Limit
	}
	rows, err := p.pool.Query(ctx, q+` ORDER BY created_at DESC, id DESC LIMIT `+arg(lim), args...)
	if err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	defer rows.Close()
	out := []*Approval{}
	size := 0
	for !f.full(size) && rows.Next() {
		a, err := scanPGApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list approvals: %w", err)
		}
		a.Status = f.listedStatus(a)
		out = append(out, a)
		size += len(a.Arguments)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	return out, nil
}

// DecideApproval implements ApprovalStore.DecideApproval. Of concurrent deciders (on
// any replica) the others wait for the winner's commit on the row lock, then get
// ErrConflict with its decision.
func (p *Postgres) DecideApproval(ctx context.Context, id string, d ApprovalDecision) (*Approval, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: decide approval %s: %w", id, err)
	}
	if err := prepareDecision(&d); err != nil {
		return nil, fmt.Errorf("store: decide approval %s: %w", id, err)
	}
	dec, err := encodeDecision(d)
	if err != nil {
		return nil, fmt.Errorf("store: decide approval %s: %w", id, err)
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: decide approval %s: begin: %w", id, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	at := utcMicro(d.At)
	a, err := scanPGApproval(tx.QueryRow(ctx, `UPDATE approvals SET status = $1, decision = $2, decided_at = $3
		WHERE id = $4 AND status = 'pending' AND (expires_at IS NULL OR expires_at > $3)
		RETURNING `+pgApprovalColumns, string(decisionStatus(d)), dec, at, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return p.refuseDecision(ctx, tx, id, d.At)
	}
	if err != nil {
		return nil, fmt.Errorf("store: decide approval %s: %w", id, err)
	}
	if d.SessionSpec != nil {
		if err := pgChangeSessionSpec(ctx, tx, a.SessionID, d, at); err != nil {
			return nil, fmt.Errorf("store: decide approval %s: session %s: %w", id, a.SessionID, err)
		}
	}
	action := AuditApprovalApproved
	if d.Kind == DecisionDeny {
		action = AuditApprovalDenied
		if err := pgFailWaiting(ctx, tx, []string{a.CallID}, deniedResult(d), d.At); err != nil {
			return nil, fmt.Errorf("store: decide approval %s: finish call %s: %w", id, a.CallID, err)
		}
	}
	e, err := approvalAudit(a, action, d.Actor, d.At, auditedDecision(a.Decision, d))
	if err == nil {
		err = pgInsertAudit(ctx, tx, e)
	}
	if err != nil {
		return nil, fmt.Errorf("store: decide approval %s: audit: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("store: decide approval %s: commit: %w", id, err)
	}
	return a, nil
}

// refuseDecision explains a decision that changed nothing, expiring the approval if
// that is why (and committing that).
func (p *Postgres) refuseDecision(ctx context.Context, tx pgx.Tx, id string, at time.Time) (*Approval, error) {
	cur, err := scanPGApproval(tx.QueryRow(ctx, `SELECT `+pgApprovalColumns+` FROM approvals WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: decide approval %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: decide approval %s: %w", id, err)
	}
	if !expiredNow(cur, at) {
		return cur, fmt.Errorf("store: decide approval %s: already %s: %w", id, cur.Status, ErrConflict)
	}
	expired, err := pgExpire(ctx, tx, `id = $2 AND `, []any{id}, at)
	if err != nil {
		return nil, fmt.Errorf("store: decide approval %s: expire: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("store: decide approval %s: expire: commit: %w", id, err)
	}
	if len(expired) == 0 {
		// Another replica expired or decided it between our two statements.
		if cur, err = p.GetApproval(ctx, id); err != nil {
			return nil, fmt.Errorf("store: decide approval %s: %w", id, err)
		}
		return cur, fmt.Errorf("store: decide approval %s: already %s: %w", id, cur.Status, ErrConflict)
	}
	cur = expired[0]
	return cur, fmt.Errorf("store: decide approval %s: expired at %s: %w", id, cur.ExpiresAt.Format(time.RFC3339Nano), ErrApprovalExpired)
}

// pgFailWaiting finishes the calls that are still waiting as failed with result.
// A call that is no longer waiting (finished meanwhile) is left as it is.
func pgFailWaiting(ctx context.Context, tx pgx.Tx, callIDs []string, result *tool.Result, at time.Time) error {
	if len(callIDs) == 0 {
		return nil
	}
	enc, err := encodeResult(result)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE tool_calls SET status = 'failed', result = $1, error_kind = $2, finished_at = $3
		WHERE id = ANY($4) AND status = 'waiting'`, enc, string(result.ErrorKind), utcMicro(at), callIDs)
	return err
}

// pgExpire marks pending approvals expired at at ($1; cond narrows them with $2… and
// ends in "AND "), finishes their waiting calls with expiredResult and audits each, in tx.
func pgExpire(ctx context.Context, tx pgx.Tx, cond string, args []any, at time.Time) ([]*Approval, error) {
	rows, err := tx.Query(ctx, `UPDATE approvals SET status = 'expired', decided_at = $1
		WHERE `+cond+`status = 'pending' AND expires_at <= $1
		RETURNING `+pgApprovalColumns, append([]any{utcMicro(at)}, args...)...)
	if err != nil {
		return nil, err
	}
	expired, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Approval, error) { return scanPGApproval(r) })
	if err != nil {
		return nil, err
	}
	calls := make([]string, len(expired))
	for i, a := range expired {
		calls[i] = a.CallID
	}
	if err := pgFailWaiting(ctx, tx, calls, expiredResult(), at); err != nil {
		return nil, fmt.Errorf("finish calls: %w", err)
	}
	for _, a := range expired {
		e, err := approvalAudit(a, AuditApprovalExpired, AuditActorSystem, at, nil)
		if err == nil {
			err = pgInsertAudit(ctx, tx, e)
		}
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
	}
	return expired, nil
}

// ExpireApprovals implements ApprovalStore.ExpireApprovals. Replicas running it at
// once expire (and audit) each approval once: the UPDATE locks the rows it changes.
func (p *Postgres) ExpireApprovals(ctx context.Context, at time.Time) ([]*Approval, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: expire approvals: %w", err)
	}
	if at.IsZero() {
		at = now()
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: expire approvals: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	expired, err := pgExpire(ctx, tx, "", nil, at)
	if err != nil {
		return nil, fmt.Errorf("store: expire approvals: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("store: expire approvals: commit: %w", err)
	}
	return expired, nil
}

// ApprovedUnclaimed implements ApprovalStore.ApprovedUnclaimed.
func (p *Postgres) ApprovedUnclaimed(ctx context.Context, decidedBefore time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := p.pool.Query(ctx, approvedUnclaimedQuery("$1", "$2"), utcMicro(decidedBefore), limit)
	if err != nil {
		return nil, fmt.Errorf("store: approved unclaimed calls: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: approved unclaimed calls: %w", err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

// ClaimCall implements ApprovalStore.ClaimCall. Concurrent claimers on any
// replica queue on the call's row lock; after the winner commits, the others re-check
// status = 'waiting', find running, and get ErrConflict.
func (p *Postgres) ClaimCall(ctx context.Context, callID, owner string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: claim call %s: %w", callID, err)
	}
	if at.IsZero() {
		at = now()
	}
	tag, err := p.pool.Exec(ctx, `UPDATE tool_calls SET status = 'running', owner = $1, started_at = $2
		WHERE id = $3 AND status = 'waiting'
		AND NOT EXISTS (SELECT 1 FROM approvals WHERE call_id = $3 AND status <> 'approved')`,
		owner, utcMicro(at), callID)
	if err != nil {
		return fmt.Errorf("store: claim call %s: %w", callID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var aid, status string
	err = p.pool.QueryRow(ctx, `SELECT id, status FROM approvals WHERE call_id = $1 AND status <> 'approved'
		ORDER BY created_at DESC LIMIT 1`, callID).Scan(&aid, &status)
	if err == nil {
		return fmt.Errorf("store: claim call %s: approval %s is %s: %w", callID, aid, status, ErrConflict)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("store: claim call %s: %w", callID, err)
	}
	return fmt.Errorf("store: claim: %w", pgExplainCall(ctx, p.pool, callID))
}

// CountPendingApprovals counts the pending approvals of every tenant, without reading
// them (the pending gauge).
func (p *Postgres) CountPendingApprovals(ctx context.Context) (int, error) {
	var n int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM approvals WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count pending approvals: %w", err)
	}
	return n, nil
}

// pgChangeSessionSpec rewrites session id's spec with d.SessionSpec in tx, the row
// locked from the read to the write.
func pgChangeSessionSpec(ctx context.Context, tx pgx.Tx, id string, d ApprovalDecision, at time.Time) error {
	var spec []byte
	err := tx.QueryRow(ctx, `SELECT spec FROM sessions WHERE id = $1 FOR UPDATE`, id).Scan(&spec)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	changed, err := d.changeSpec(spec)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE sessions SET spec = $1, updated_at = greatest(updated_at, $2) WHERE id = $3`,
		rawJSON(changed), at, id)
	return err
}
