package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

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

// ListAudit returns the entries of tenant ("" for every tenant), newest first (ts
// descending, then id descending), at most limit (<= 0: no limit).
func (s *SQLite) ListAudit(ctx context.Context, tenant string, limit int) ([]*AuditEntry, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, ts, tenant, actor, action, subject, detail FROM audit_log
		WHERE (? = '' OR tenant = ?) ORDER BY ts DESC, id DESC LIMIT ?`, tenant, tenant, limit)
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
	return out, nil
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

// ListAudit returns the entries of tenant ("" for every tenant), newest first (ts
// descending, then id descending), at most limit (<= 0: no limit).
func (p *Postgres) ListAudit(ctx context.Context, tenant string, limit int) ([]*AuditEntry, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := p.pool.Query(ctx, `SELECT id, ts, tenant, actor, action, subject, detail FROM audit_log
		WHERE ($1 = '' OR tenant = $1) ORDER BY ts DESC, id DESC LIMIT $2`, tenant, lim)
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
	return out, nil
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
