package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// SQLite runs every write on its single writer connection in a BEGIN IMMEDIATE
// transaction: writes are serialized, so each conditional update below sees the state
// the previous write committed.

const sqliteApprovalColumns = `id, tenant, session_id, call_id, tool, arguments, risk, reason, suggestions, status, decision, created_at, expires_at, decided_at`

func scanSQLiteApproval(row interface{ Scan(...any) error }) (*Approval, error) {
	var (
		a                  Approval
		args, sugg, dec    []byte
		risk, status       string
		created            string
		expires, decidedAt sql.NullString
	)
	if err := row.Scan(&a.ID, &a.Tenant, &a.SessionID, &a.CallID, &a.Tool, &args, &risk, &a.Reason,
		&sugg, &status, &dec, &created, &expires, &decidedAt); err != nil {
		return nil, err
	}
	a.Risk, a.Status = tool.Risk(risk), ApprovalStatus(status)
	if len(args) > 0 {
		a.Arguments = json.RawMessage(args)
	}
	if len(sugg) > 0 {
		a.Suggestions = json.RawMessage(sugg)
	}
	var err error
	if a.CreatedAt, err = parseSQLiteTime(created); err != nil {
		return nil, fmt.Errorf("created_at: %w", err)
	}
	if a.ExpiresAt, err = parseSQLiteTimePtr(expires); err != nil {
		return nil, fmt.Errorf("expires_at: %w", err)
	}
	if a.DecidedAt, err = parseSQLiteTimePtr(decidedAt); err != nil {
		return nil, fmt.Errorf("decided_at: %w", err)
	}
	if a.Decision, err = decodeDecision(dec, a.DecidedAt); err != nil {
		return nil, fmt.Errorf("decision: %w", err)
	}
	return &a, nil
}

// sqliteExplainCall says why a conditional update of call id changed nothing.
func sqliteExplainCall(ctx context.Context, q auditSQLQuerier, id string) error {
	var status string
	err := q.QueryRowContext(ctx, `SELECT status FROM tool_calls WHERE id = ?`, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("call %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("call %s: %w", id, err)
	}
	return fmt.Errorf("call %s is %s: %w", id, status, ErrConflict)
}

// CreateApproval implements ApprovalStore.CreateApproval.
func (s *SQLite) CreateApproval(ctx context.Context, a *Approval) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: create approval: %w", err)
	}
	if err := prepareApproval(a); err != nil {
		return fmt.Errorf("store: create approval: %w", err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: create approval %s: begin: %w", a.ID, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var sessionID, tenant, name string
	err = tx.QueryRowContext(ctx, `UPDATE tool_calls SET status = 'waiting'
		WHERE id = ? AND status IN ('pending', 'running') RETURNING session_id, tenant, name`, a.CallID,
	).Scan(&sessionID, &tenant, &name)
	if errors.Is(err, sql.ErrNoRows) {
		err = sqliteExplainCall(ctx, tx, a.CallID)
	}
	if err != nil {
		return fmt.Errorf("store: create approval %s: %w", a.ID, err)
	}
	if err := adoptCall(a, sessionID, tenant, name); err != nil {
		return fmt.Errorf("store: create approval: %w", err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO approvals (`+sqliteApprovalColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', NULL, ?, ?, NULL)`,
		a.ID, a.Tenant, a.SessionID, a.CallID, a.Tool, sqliteText(a.Arguments), string(a.Risk), a.Reason,
		sqliteText(a.Suggestions), sqliteTime(a.CreatedAt), sqliteTimePtr(a.ExpiresAt))
	if isSQLiteUniqueViolation(err) {
		return fmt.Errorf("store: create approval %s: already exists: %w", a.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("store: create approval %s: %w", a.ID, err)
	}
	e, err := approvalAudit(a, AuditApprovalRequested, AuditActorSystem, a.CreatedAt, nil)
	if err == nil {
		err = sqliteInsertAudit(ctx, tx, e)
	}
	if err != nil {
		return fmt.Errorf("store: create approval %s: audit: %w", a.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: create approval %s: commit: %w", a.ID, err)
	}
	return nil
}

func (s *SQLite) GetApproval(ctx context.Context, id string) (*Approval, error) {
	a, err := scanSQLiteApproval(s.r.QueryRowContext(ctx,
		`SELECT `+sqliteApprovalColumns+` FROM approvals WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: get approval %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get approval %s: %w", id, err)
	}
	return a, nil
}

// ListApprovals returns the approvals matching f by created_at descending (ties: id
// descending). Nothing matching is an empty slice.
func (s *SQLite) ListApprovals(ctx context.Context, f ApprovalFilter) ([]*Approval, error) {
	if err := checkApprovalFilter(f); err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	var where []string
	var args []any
	add := func(cond string, vs ...any) { where = append(where, cond); args = append(args, vs...) }
	if f.Tenant != "" {
		add("tenant = ?", f.Tenant)
	}
	switch {
	case !f.Now.IsZero() && f.Status == ApprovalPending:
		add("status = 'pending' AND (expires_at IS NULL OR expires_at > ?)", sqliteTime(f.Now))
	case !f.Now.IsZero() && f.Status == ApprovalExpired:
		add("(status = 'expired' OR (status = 'pending' AND expires_at <= ?))", sqliteTime(f.Now))
	case f.Status != "":
		add("status = ?", string(f.Status))
	}
	if f.SessionID != "" {
		add("session_id = ?", f.SessionID)
	}
	if f.CallID != "" {
		add("call_id = ?", f.CallID)
	}
	switch {
	case f.BeforeID != "":
		b := sqliteTime(f.Before)
		add("(created_at, id) < (?, ?)", b, f.BeforeID)
	case !f.Before.IsZero():
		add("created_at < ?", sqliteTime(f.Before))
	}
	q := `SELECT ` + sqliteApprovalColumns + ` FROM approvals`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY created_at DESC, id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	defer rows.Close()
	out := []*Approval{}
	size := 0
	for !f.full(size) && rows.Next() {
		a, err := scanSQLiteApproval(rows)
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

// DecideApproval implements ApprovalStore.DecideApproval. The writer's BEGIN
// IMMEDIATE serializes deciders: the second sees the first's commit.
func (s *SQLite) DecideApproval(ctx context.Context, id string, d ApprovalDecision) (*Approval, error) {
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
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: decide approval %s: begin: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	at := sqliteTime(d.At)
	a, err := scanSQLiteApproval(tx.QueryRowContext(ctx, `UPDATE approvals SET status = ?, decision = ?, decided_at = ?
		WHERE id = ? AND status = 'pending' AND (expires_at IS NULL OR expires_at > ?)
		RETURNING `+sqliteApprovalColumns, string(decisionStatus(d)), string(dec), at, id, at))
	if errors.Is(err, sql.ErrNoRows) {
		return s.refuseDecision(ctx, tx, id, d.At)
	}
	if err != nil {
		return nil, fmt.Errorf("store: decide approval %s: %w", id, err)
	}
	if d.SessionSpec != nil {
		if err := sqliteChangeSessionSpec(ctx, tx, a.SessionID, d, at); err != nil {
			return nil, fmt.Errorf("store: decide approval %s: session %s: %w", id, a.SessionID, err)
		}
	}
	action := AuditApprovalApproved
	if d.Kind == DecisionDeny {
		action = AuditApprovalDenied
		if err := sqliteFailWaiting(ctx, tx, []string{a.CallID}, deniedResult(d), d.At); err != nil {
			return nil, fmt.Errorf("store: decide approval %s: finish call %s: %w", id, a.CallID, err)
		}
	}
	e, err := approvalAudit(a, action, d.Actor, d.At, auditedDecision(a.Decision, d))
	if err == nil {
		err = sqliteInsertAudit(ctx, tx, e)
	}
	if err != nil {
		return nil, fmt.Errorf("store: decide approval %s: audit: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: decide approval %s: commit: %w", id, err)
	}
	return a, nil
}

// refuseDecision explains a decision that changed nothing, expiring the approval if
// that is why (and committing that).
func (s *SQLite) refuseDecision(ctx context.Context, tx *sql.Tx, id string, at time.Time) (*Approval, error) {
	cur, err := scanSQLiteApproval(tx.QueryRowContext(ctx, `SELECT `+sqliteApprovalColumns+` FROM approvals WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: decide approval %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: decide approval %s: %w", id, err)
	}
	if !expiredNow(cur, at) {
		return cur, fmt.Errorf("store: decide approval %s: already %s: %w", id, cur.Status, ErrConflict)
	}
	expired, err := sqliteExpire(ctx, tx, `id = ? AND `, []any{id}, at)
	if err != nil {
		return nil, fmt.Errorf("store: decide approval %s: expire: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: decide approval %s: expire: commit: %w", id, err)
	}
	if len(expired) != 1 { // cannot happen: this transaction holds the writer since the read
		return cur, fmt.Errorf("store: decide approval %s: expired meanwhile: %w", id, ErrConflict)
	}
	cur = expired[0]
	return cur, fmt.Errorf("store: decide approval %s: expired at %s: %w", id, cur.ExpiresAt.Format(time.RFC3339Nano), ErrApprovalExpired)
}

// sqliteFailWaiting finishes the calls that are still waiting as failed with result.
// A call that is no longer waiting (finished meanwhile) is left as it is.
func sqliteFailWaiting(ctx context.Context, tx *sql.Tx, callIDs []string, result *tool.Result, at time.Time) error {
	enc, err := encodeResult(result)
	if err != nil {
		return err
	}
	stmt, err := tx.PrepareContext(ctx, `UPDATE tool_calls SET status = 'failed', result = ?, error_kind = ?, finished_at = ?
		WHERE id = ? AND status = 'waiting'`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, id := range callIDs {
		if _, err := stmt.ExecContext(ctx, string(enc), string(result.ErrorKind), sqliteTime(at), id); err != nil {
			return err
		}
	}
	return nil
}

// sqliteExpire marks pending approvals expired at at (cond narrows them; it ends in
// "AND "), finishes their waiting calls with expiredResult and audits each, in tx.
func sqliteExpire(ctx context.Context, tx *sql.Tx, cond string, args []any, at time.Time) ([]*Approval, error) {
	t := sqliteTime(at)
	rows, err := tx.QueryContext(ctx, `UPDATE approvals SET status = 'expired', decided_at = ?
		WHERE `+cond+`status = 'pending' AND expires_at IS NOT NULL AND expires_at <= ?
		RETURNING `+sqliteApprovalColumns, append(append([]any{t}, args...), t)...)
	if err != nil {
		return nil, err
	}
	var expired []*Approval
	for rows.Next() {
		a, err := scanSQLiteApproval(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		expired = append(expired, a)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	calls := make([]string, len(expired))
	for i, a := range expired {
		calls[i] = a.CallID
	}
	if err := sqliteFailWaiting(ctx, tx, calls, expiredResult(), at); err != nil {
		return nil, fmt.Errorf("finish calls: %w", err)
	}
	for _, a := range expired {
		e, err := approvalAudit(a, AuditApprovalExpired, AuditActorSystem, at, nil)
		if err == nil {
			err = sqliteInsertAudit(ctx, tx, e)
		}
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
	}
	return expired, nil
}

// ExpireApprovals implements ApprovalStore.ExpireApprovals.
func (s *SQLite) ExpireApprovals(ctx context.Context, at time.Time) ([]*Approval, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: expire approvals: %w", err)
	}
	if at.IsZero() {
		at = now()
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: expire approvals: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	expired, err := sqliteExpire(ctx, tx, "", nil, at)
	if err != nil {
		return nil, fmt.Errorf("store: expire approvals: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: expire approvals: commit: %w", err)
	}
	return expired, nil
}

// ApprovedUnclaimed implements ApprovalStore.ApprovedUnclaimed.
func (s *SQLite) ApprovedUnclaimed(ctx context.Context, decidedBefore time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, approvedUnclaimedQuery("?", "?"), sqliteTime(decidedBefore), limit)
	if err != nil {
		return nil, fmt.Errorf("store: approved unclaimed calls: %w", err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: approved unclaimed calls: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: approved unclaimed calls: %w", err)
	}
	return ids, nil
}

// ClaimCall implements ApprovalStore.ClaimCall.
func (s *SQLite) ClaimCall(ctx context.Context, callID, owner string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: claim call %s: %w", callID, err)
	}
	if at.IsZero() {
		at = now()
	}
	res, err := s.w.ExecContext(ctx, `UPDATE tool_calls SET status = 'running', owner = ?, started_at = ?
		WHERE id = ? AND status = 'waiting'
		AND NOT EXISTS (SELECT 1 FROM approvals WHERE call_id = ? AND status <> 'approved')`,
		owner, sqliteTime(at), callID, callID)
	if err != nil {
		return fmt.Errorf("store: claim call %s: %w", callID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: claim call %s: %w", callID, err)
	} else if n == 1 {
		return nil
	}
	var aid, status string
	err = s.r.QueryRowContext(ctx, `SELECT id, status FROM approvals WHERE call_id = ? AND status <> 'approved'
		ORDER BY created_at DESC LIMIT 1`, callID).Scan(&aid, &status)
	if err == nil {
		return fmt.Errorf("store: claim call %s: approval %s is %s: %w", callID, aid, status, ErrConflict)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: claim call %s: %w", callID, err)
	}
	return fmt.Errorf("store: claim: %w", sqliteExplainCall(ctx, s.r, callID))
}

// CountPendingApprovals counts the pending approvals of every tenant, without reading
// them (the pending gauge).
func (s *SQLite) CountPendingApprovals(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM approvals WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count pending approvals: %w", err)
	}
	return n, nil
}

// sqliteChangeSessionSpec rewrites session id's spec with d.SessionSpec in tx (the
// one writer connection: nothing writes between the read and the write).
func sqliteChangeSessionSpec(ctx context.Context, tx *sql.Tx, id string, d ApprovalDecision, at string) error {
	var spec []byte
	err := tx.QueryRowContext(ctx, `SELECT spec FROM sessions WHERE id = ?`, id).Scan(&spec)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	changed, err := d.changeSpec(spec)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE sessions SET spec = ?, updated_at = max(updated_at, ?) WHERE id = ?`,
		sqliteText(changed), at, id)
	return err
}
