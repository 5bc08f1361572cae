package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// AppendAudit appends e and writes the assigned ID (and a zero
// At, set to now) back into e.
func (s *SQLite) AppendAudit(ctx context.Context, e *AuditEntry) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: append audit: %w", err)
	}
	if err := prepareAudit(e); err != nil {
		return fmt.Errorf("store: append audit: %w", err)
	}
	if err := sqliteInsertAudit(ctx, s.w, e); err != nil {
		return fmt.Errorf("store: append audit: %w", err)
	}
	return nil
}

// ListAudit returns the entries f selects, newest first (see AuditFilter).
func (s *SQLite) ListAudit(ctx context.Context, f AuditFilter) ([]*AuditEntry, error) {
	q, args := sqliteAuditQuery(f)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list audit: %w", err)
	}
	defer rows.Close()
	out := []*AuditEntry{}
	for rows.Next() {
		var (
			e      AuditEntry
			ts     string
			detail []byte
		)
		if err := rows.Scan(&e.ID, &ts, &e.Tenant, &e.Actor, &e.Action, &e.Subject, &detail); err != nil {
			return nil, fmt.Errorf("store: list audit: %w", err)
		}
		if e.At, err = parseSQLiteTime(ts); err != nil {
			return nil, fmt.Errorf("store: list audit: ts: %w", err)
		}
		if len(detail) > 0 {
			e.Detail = json.RawMessage(detail)
		}
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list audit: %w", err)
	}
	if len(out) == 0 && f.Before > 0 {
		return out, auditCursorExists(ctx, s.r.QueryRowContext(ctx, `SELECT 1 FROM audit_log WHERE id = ? AND (? = '' OR tenant = ?)`,
			f.Before, f.Tenant, f.Tenant), f.Before)
	}
	return out, nil
}

// sqliteAuditQuery is ListAudit's query: a range of audit_log_tenant_ts_idx (one
// tenant) or audit_log_ts_idx (all), read backwards from the cursor's (ts, id).
func sqliteAuditQuery(f AuditFilter) (string, []any) {
	var (
		where []string
		args  []any
	)
	if f.Tenant != "" {
		where, args = append(where, "tenant = ?"), append(args, f.Tenant)
	}
	if f.Before > 0 {
		// The cursor is one of the listed tenant's entries (auditCursor).
		where = append(where, "(ts, id) < (SELECT ts, id FROM audit_log WHERE id = ? AND (? = '' OR tenant = ?))")
		args = append(args, f.Before, f.Tenant, f.Tenant)
	}
	if f.Action != "" {
		where, args = append(where, "action = ?"), append(args, f.Action)
	}
	if f.Subject != "" {
		where, args = append(where, "subject = ?"), append(args, f.Subject)
	}
	if f.ActionPrefix != "" {
		where, args = append(where, "substr(action, 1, ?) = ?"), append(args, len(f.ActionPrefix), f.ActionPrefix)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = -1
	}
	return `SELECT id, ts, tenant, actor, action, subject, detail FROM audit_log` + whereClause(where) +
		` ORDER BY ts DESC, id DESC LIMIT ?`, append(args, limit)
}

// auditPGQuerier is what pgInsertAudit needs of a pool or a transaction.
type auditPGQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func pgInsertAudit(ctx context.Context, q auditPGQuerier, e *AuditEntry) error {
	return q.QueryRow(ctx,
		`INSERT INTO audit_log (ts, tenant, actor, action, subject, detail) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
		utcMicro(e.At), e.Tenant, e.Actor, e.Action, e.Subject, rawJSON(e.Detail)).Scan(&e.ID)
}

// AppendAudit appends e and writes the assigned ID (and a zero At, set to now) back
// into e.
func (p *Postgres) AppendAudit(ctx context.Context, e *AuditEntry) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: append audit: %w", err)
	}
	if err := prepareAudit(e); err != nil {
		return fmt.Errorf("store: append audit: %w", err)
	}
	if err := pgInsertAudit(ctx, p.pool, e); err != nil {
		return fmt.Errorf("store: append audit: %w", err)
	}
	return nil
}

// ListAudit returns the entries f selects, newest first (see AuditFilter).
func (p *Postgres) ListAudit(ctx context.Context, f AuditFilter) ([]*AuditEntry, error) {
	q, args := pgAuditQuery(f)
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list audit: %w", err)
	}
	defer rows.Close()
	out := []*AuditEntry{}
	for rows.Next() {
		var (
			e      AuditEntry
			detail []byte
		)
		if err := rows.Scan(&e.ID, &e.At, &e.Tenant, &e.Actor, &e.Action, &e.Subject, &detail); err != nil {
			return nil, fmt.Errorf("store: list audit: %w", err)
		}
		e.At = e.At.UTC()
		if len(detail) > 0 {
			e.Detail = json.RawMessage(detail)
		}
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list audit: %w", err)
	}
	if len(out) == 0 && f.Before > 0 {
		return out, auditCursorExists(ctx, p.pool.QueryRow(ctx, `SELECT 1 FROM audit_log WHERE id = $1 AND ($2 = '' OR tenant = $2)`,
			f.Before, f.Tenant), f.Before)
	}
	return out, nil
}

// pgAuditQuery is ListAudit's query: a range of audit_log_tenant_ts_idx (one tenant)
// or audit_log_ts_id_idx (all), read backwards from the cursor's (ts, id).
func pgAuditQuery(f AuditFilter) (string, []any) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.Tenant != "" {
		where = append(where, "tenant = "+arg(f.Tenant))
	}
	if f.Before > 0 {
		// The cursor is one of the listed tenant's entries (auditCursor).
		cur := "id = " + arg(f.Before)
		if f.Tenant != "" {
			cur += " AND tenant = " + arg(f.Tenant)
		}
		where = append(where, "(ts, id) < (SELECT ts, id FROM audit_log WHERE "+cur+")")
	}
	if f.Action != "" {
		where = append(where, "action = "+arg(f.Action))
	}
	if f.Subject != "" {
		where = append(where, "subject = "+arg(f.Subject))
	}
	if f.ActionPrefix != "" {
		where = append(where, "starts_with(action, "+arg(f.ActionPrefix)+")")
	}
	q := `SELECT id, ts, tenant, actor, action, subject, detail FROM audit_log` + whereClause(where) + ` ORDER BY ts DESC, id DESC`
	if f.Limit > 0 {
		q += " LIMIT " + arg(f.Limit)
	}
	return q, args
}

// auditCursorExists tells an empty page after an entry (the end of the log) from a
// page after an entry that does not exist (ErrNotFound), from a row of "SELECT 1
// FROM audit_log WHERE id = cursor" (and, for one tenant's pages, of that tenant:
// another tenant's entry is no cursor there, or pages would tell when it was made).
func auditCursorExists(ctx context.Context, row interface{ Scan(...any) error }, id int64) error {
	var one int
	err := row.Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows), errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("store: list audit: no entry %d: %w", id, ErrNotFound)
	case err != nil:
		return fmt.Errorf("store: list audit: %w", err)
	}
	return ctx.Err()
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// auditSQLQuerier is what sqliteInsertAudit needs of the writer or a transaction.
type auditSQLQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func sqliteInsertAudit(ctx context.Context, q auditSQLQuerier, e *AuditEntry) error {
	return q.QueryRowContext(ctx,
		`INSERT INTO audit_log (ts, tenant, actor, action, subject, detail) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
		sqliteTime(e.At), e.Tenant, e.Actor, e.Action, e.Subject, sqliteText(e.Detail)).Scan(&e.ID)
}
