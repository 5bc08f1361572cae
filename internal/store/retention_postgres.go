package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgFinishedCalls deletes DeleteFinishedCalls' batch in one statement: it steps
// through the tenants from the cursor ($3) as retentionNextTenant does, and takes
// each one's due calls, a range of tool_calls_tenant_created_idx, until it has limit
// ($2). The executor pulls tenants only as far as the limit needs. The calls it
// picks are locked (others sweeping at the same time skip them and take the next
// ones) and deleted with their approvals; it returns the tenant of each.
// Args: cutoff, limit, from.
const pgFinishedCalls = `WITH RECURSIVE t(tenant) AS (
		SELECT MIN(tenant) FROM tool_calls WHERE tenant >= $3
		UNION ALL
		SELECT (SELECT MIN(tenant) FROM tool_calls WHERE tenant > t.tenant) FROM t WHERE t.tenant IS NOT NULL
	), doomed AS (
		SELECT d.id FROM t CROSS JOIN LATERAL (
			SELECT c.id FROM tool_calls c
			WHERE c.tenant = t.tenant AND c.created_at < $1 AND c.finished_at < $1 AND c.status IN ` + terminalStatuses + ` AND NOT c.output_open
			AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.call_id = c.id AND a.status = 'pending')
			ORDER BY c.created_at, c.id LIMIT $2
			FOR UPDATE SKIP LOCKED
		) d
		WHERE t.tenant IS NOT NULL
		LIMIT $2
	), approvals_gone AS (
		DELETE FROM approvals a USING doomed d WHERE a.call_id = d.id AND a.status <> 'pending'
	)
	DELETE FROM tool_calls c USING doomed d WHERE c.id = d.id RETURNING c.tenant`

// DeleteFinishedCalls runs pgFinishedCalls: one statement, one transaction.
func (p *Postgres) DeleteFinishedCalls(ctx context.Context, before time.Time, from string, limit int) (int, string, error) {
	limit = retentionLimit(limit)
	rows, err := p.pool.Query(ctx, pgFinishedCalls, utcMicro(before), limit, from)
	if err != nil {
		return 0, "", fmt.Errorf("store: delete finished calls: %w", err)
	}
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, "", fmt.Errorf("store: delete finished calls: %w", err)
	}
	if len(tenants) < limit {
		return len(tenants), "", nil
	}
	return len(tenants), slices.Max(tenants), nil
}

func (p *Postgres) UnusedSessions(ctx context.Context, before time.Time, after *Session, limit int) ([]*Session, error) {
	var (
		rows pgx.Rows
		err  error
	)
	const cols = `SELECT id, tenant, spec, created_at, updated_at FROM sessions WHERE updated_at < $1`
	if after == nil {
		rows, err = p.pool.Query(ctx, cols+` ORDER BY updated_at, id LIMIT $2`, utcMicro(before), retentionLimit(limit))
	} else {
		rows, err = p.pool.Query(ctx, cols+` AND (updated_at, id) > ($2, $3) ORDER BY updated_at, id LIMIT $4`,
			utcMicro(before), utcMicro(after.UpdatedAt), after.ID, retentionLimit(limit))
	}
	if err != nil {
		return nil, fmt.Errorf("store: unused sessions: %w", err)
	}
	defer rows.Close()
	var out []*Session
	for rows.Next() {
		var (
			s    Session
			spec []byte
		)
		if err := rows.Scan(&s.ID, &s.Tenant, &spec, &s.CreatedAt, &s.UpdatedAt); err != nil {
			return nil, fmt.Errorf("store: unused sessions: %w", err)
		}
		if len(spec) > 0 {
			s.Spec = json.RawMessage(spec)
		}
		s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
		out = append(out, &s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: unused sessions: %w", err)
	}
	return out, nil
}

func (p *Postgres) ExistingSessions(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) > RetentionBatch {
		return nil, fmt.Errorf("store: existing sessions: %d ids, at most %d: %w", len(ids), RetentionBatch, ErrInvalid)
	}
	rows, err := p.pool.Query(ctx, `SELECT id FROM sessions WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("store: existing sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: existing sessions: %w", err)
	}
	return out, nil
}

func (p *Postgres) TouchSession(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		at = now()
	}
	tag, err := p.pool.Exec(ctx, `UPDATE sessions SET updated_at = greatest(updated_at, $1) WHERE id = $2`, utcMicro(at), id)
	if err != nil {
		return fmt.Errorf("store: touch session %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: touch session %s: %w", id, ErrNotFound)
	}
	return nil
}

// DeleteUnusedSession locks the session's row first: a TouchSession (a replica loading
// or using the session) waits for the delete, then finds no row; one that committed
// first is seen by the check, which runs after the lock with a new snapshot. Two
// replicas sweeping at once queue on the lock; the second finds no row.
func (p *Postgres) DeleteUnusedSession(ctx context.Context, id string, before time.Time, limit int) (int, bool, error) {
	return p.deleteSession(ctx, id, before, limit, true)
}

// DeleteSession is DeleteUnusedSession for a client's delete: see Retention.
func (p *Postgres) DeleteSession(ctx context.Context, id string, before time.Time, limit int) (int, bool, error) {
	return p.deleteSession(ctx, id, before, limit, false)
}

func (p *Postgres) deleteSession(ctx context.Context, id string, before time.Time, limit int, openOutputKeeps bool) (int, bool, error) {
	limit = retentionLimit(limit)
	cut := utcMicro(before)
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("store: delete session %s: begin: %w", id, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE`, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, fmt.Errorf("store: delete session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: delete session %s: %w", id, err)
	}
	var unused bool
	if err := tx.QueryRow(ctx, `SELECT `+sessionUnusedCond("$1", "$1", "$1", openOutputKeeps)+` FROM sessions s WHERE s.id = $2`, cut, id).Scan(&unused); err != nil {
		return 0, false, fmt.Errorf("store: delete session %s: %w", id, err)
	}
	if !unused {
		return 0, false, fmt.Errorf("store: delete session %s: in use: %w", id, ErrConflict)
	}
	// Only calls the check judged: one recorded since (by a replica that did not touch
	// the session) is not deleted with it.
	tag, err := tx.Exec(ctx, `WITH doomed AS (
			SELECT id FROM tool_calls WHERE session_id = $1 AND status IN `+terminalStatuses+`
			AND created_at < $2 AND finished_at < $2 LIMIT $3
		), approvals_gone AS (
			DELETE FROM approvals a USING doomed d WHERE a.call_id = d.id AND a.status <> 'pending'
		)
		DELETE FROM tool_calls c USING doomed d WHERE c.id = d.id`, id, cut, limit)
	if err != nil {
		return 0, false, fmt.Errorf("store: delete session %s: calls: %w", id, err)
	}
	calls := int(tag.RowsAffected())
	gone := calls < limit
	if gone {
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM approvals WHERE session_id = $1 AND status <> 'pending'`, id)
		b.Queue(`DELETE FROM tasks WHERE session_id = $1`, id)
		b.Queue(`DELETE FROM scratchpad WHERE session_id = $1`, id)
		b.Queue(`DELETE FROM jobs WHERE session_id = $1`, id)
		b.Queue(`DELETE FROM artifacts WHERE session_id = $1`, id)
		b.Queue(`DELETE FROM file_stamps WHERE session_id = $1`, id)
		b.Queue(`DELETE FROM sessions WHERE id = $1`, id)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return 0, false, fmt.Errorf("store: delete session %s: %w", id, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, false, fmt.Errorf("store: delete session %s: commit: %w", id, err)
	}
	return calls, gone, nil
}
