package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

const (
	// sqliteFinishedCalls picks a tenant's part of DeleteFinishedCalls' batch: a range
	// of tool_calls_tenant_created_idx (args: tenant, cutoff, cutoff, limit).
	sqliteFinishedCalls = `SELECT c.id FROM tool_calls c
		WHERE c.tenant = ? AND c.created_at < ? AND c.finished_at < ? AND c.status IN ` + terminalStatuses + ` AND NOT c.output_open
		AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.call_id = c.id AND a.status = 'pending')
		ORDER BY c.created_at, c.id LIMIT ?`
	// sqliteStillFinished keeps, of DeleteFinishedCalls' candidates (a JSON array),
	// those still due, under the write lock (args: candidates, cutoff).
	sqliteStillFinished = `SELECT c.id FROM tool_calls c
		WHERE c.id IN (SELECT value FROM json_each(?)) AND c.finished_at < ? AND c.status IN ` + terminalStatuses + ` AND NOT c.output_open
		AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.call_id = c.id AND a.status = 'pending')`
	// sqliteUnusedSessions is UnusedSessions' first page, from sessions_updated_idx.
	sqliteUnusedSessions = `SELECT id, tenant, spec, created_at, updated_at FROM sessions WHERE updated_at < ?`
)

// DeleteFinishedCalls looks for the due calls on a reader, outside the write lock:
// the walk over the tenants is an index probe or two per tenant, seconds with tens of
// thousands of them, and the one writer is also the call records' (group commit),
// which would wait that long at every sweep, or fail their write timeout. Then one
// short write transaction deletes the ones still due (checked again under the lock).
// A candidate another sweep took meanwhile is not counted, so fewer than limit may
// also mean that: the next sweep goes on.
func (s *SQLite) DeleteFinishedCalls(ctx context.Context, before time.Time, from string, limit int) (int, string, error) {
	limit = retentionLimit(limit)
	cutoff := sqliteTime(before)
	candidates, stopped, err := s.finishedCallCandidates(ctx, cutoff, from, limit)
	if err != nil {
		return 0, "", fmt.Errorf("store: delete finished calls: %w", err)
	}
	if len(candidates) == 0 {
		return 0, "", nil
	}
	list, err := json.Marshal(candidates)
	if err != nil {
		return 0, "", fmt.Errorf("store: delete finished calls: %w", err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, "", fmt.Errorf("store: delete finished calls: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	ids, err := sqliteIDs(ctx, tx, sqliteStillFinished, string(list), cutoff)
	if err != nil {
		return 0, "", fmt.Errorf("store: delete finished calls: %w", err)
	}
	if len(ids) == 0 {
		return 0, "", nil
	}
	if err := sqliteDeleteCalls(ctx, tx, ids); err != nil {
		return 0, "", fmt.Errorf("store: delete finished calls: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, "", fmt.Errorf("store: delete finished calls: commit: %w", err)
	}
	if len(ids) < limit {
		stopped = ""
	}
	return len(ids), stopped, nil
}

// finishedCallCandidates lists at most limit calls due for deletion, tenant by
// tenant from the tenant from, on one reader connection (a snapshot; no write lock),
// and the tenant it stopped in when it found limit.
func (s *SQLite) finishedCallCandidates(ctx context.Context, cutoff, from string, limit int) ([]string, string, error) {
	conn, err := s.r.Conn(ctx)
	if err != nil {
		return nil, "", err
	}
	defer conn.Close()
	var ids []string
	tenant, op := from, ">="
	for {
		var next sql.NullString
		if err := conn.QueryRowContext(ctx, retentionNextTenant(op, "?"), tenant).Scan(&next); err != nil {
			return nil, "", fmt.Errorf("tenants: %w", err)
		}
		if !next.Valid {
			return ids, "", nil
		}
		tenant, op = next.String, ">"
		more, err := sqliteIDs(ctx, conn, sqliteFinishedCalls, tenant, cutoff, cutoff, limit-len(ids))
		if err != nil {
			return nil, "", err
		}
		if ids = append(ids, more...); len(ids) == limit {
			return ids, tenant, nil
		}
	}
}

// sqliteQuerier is a transaction or a connection.
type sqliteQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// sqliteIDs runs a query of one text column and collects it.
func sqliteIDs(ctx context.Context, q sqliteQuerier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// sqliteDeleteCalls deletes the calls ids and their approvals that are not pending.
func sqliteDeleteCalls(ctx context.Context, tx *sql.Tx, ids []string) error {
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM approvals WHERE call_id IN (SELECT value FROM json_each(?)) AND status <> 'pending'`, string(list)); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM tool_calls WHERE id IN (SELECT value FROM json_each(?))`, string(list)); err != nil {
		return fmt.Errorf("calls: %w", err)
	}
	return nil
}

func (s *SQLite) UnusedSessions(ctx context.Context, before time.Time, after *Session, limit int) ([]*Session, error) {
	var (
		rows *sql.Rows
		err  error
	)
	const cols = sqliteUnusedSessions
	if after == nil {
		rows, err = s.r.QueryContext(ctx, cols+` ORDER BY updated_at, id LIMIT ?`, sqliteTime(before), retentionLimit(limit))
	} else {
		au := sqliteTime(after.UpdatedAt)
		rows, err = s.r.QueryContext(ctx, cols+` AND (updated_at > ? OR (updated_at = ? AND id > ?)) ORDER BY updated_at, id LIMIT ?`,
			sqliteTime(before), au, au, after.ID, retentionLimit(limit))
	}
	if err != nil {
		return nil, fmt.Errorf("store: unused sessions: %w", err)
	}
	defer rows.Close()
	var out []*Session
	for rows.Next() {
		var (
			sess             Session
			spec             []byte
			created, updated string
		)
		if err := rows.Scan(&sess.ID, &sess.Tenant, &spec, &created, &updated); err != nil {
			return nil, fmt.Errorf("store: unused sessions: %w", err)
		}
		if len(spec) > 0 {
			sess.Spec = json.RawMessage(spec)
		}
		if sess.CreatedAt, err = parseSQLiteTime(created); err != nil {
			return nil, fmt.Errorf("store: unused sessions: %s: created_at: %w", sess.ID, err)
		}
		if sess.UpdatedAt, err = parseSQLiteTime(updated); err != nil {
			return nil, fmt.Errorf("store: unused sessions: %s: updated_at: %w", sess.ID, err)
		}
		out = append(out, &sess)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: unused sessions: %w", err)
	}
	return out, nil
}

// ExistingSessions reads on a reader: no write lock.
func (s *SQLite) ExistingSessions(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) > RetentionBatch {
		return nil, fmt.Errorf("store: existing sessions: %d ids, at most %d: %w", len(ids), RetentionBatch, ErrInvalid)
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("store: existing sessions: %w", err)
	}
	out, err := sqliteIDs(ctx, s.r, `SELECT id FROM sessions WHERE id IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, fmt.Errorf("store: existing sessions: %w", err)
	}
	return out, nil
}

func (s *SQLite) TouchSession(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		at = now()
	}
	t := sqliteTime(at)
	res, err := s.w.ExecContext(ctx, `UPDATE sessions SET updated_at = max(updated_at, ?) WHERE id = ?`, t, id)
	if err != nil {
		return fmt.Errorf("store: touch session %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: touch session %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("store: touch session %s: %w", id, ErrNotFound)
	}
	return nil
}

func (s *SQLite) DeleteUnusedSession(ctx context.Context, id string, before time.Time, limit int) (int, bool, error) {
	return s.deleteSession(ctx, id, before, limit, true)
}

// DeleteSession is DeleteUnusedSession for a client's delete: see Retention.
func (s *SQLite) DeleteSession(ctx context.Context, id string, before time.Time, limit int) (int, bool, error) {
	return s.deleteSession(ctx, id, before, limit, false)
}

func (s *SQLite) deleteSession(ctx context.Context, id string, before time.Time, limit int, openOutputKeeps bool) (int, bool, error) {
	limit = retentionLimit(limit)
	cut := sqliteTime(before)
	// BEGIN IMMEDIATE (the writer's _txlock) holds the database's write lock from
	// here: nothing can use the session between the check and the delete.
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, fmt.Errorf("store: delete session %s: begin: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var exists, unused int
	err = tx.QueryRowContext(ctx, `SELECT 1, `+sessionUnusedCond("?", "?", "?", openOutputKeeps)+` FROM sessions s WHERE s.id = ?`,
		cut, cut, cut, id).Scan(&exists, &unused)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("store: delete session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: delete session %s: %w", id, err)
	}
	if unused == 0 {
		return 0, false, fmt.Errorf("store: delete session %s: in use: %w", id, ErrConflict)
	}
	ids, err := sqliteIDs(ctx, tx, `SELECT id FROM tool_calls WHERE session_id = ? LIMIT ?`, id, limit)
	if err != nil {
		return 0, false, fmt.Errorf("store: delete session %s: %w", id, err)
	}
	if len(ids) > 0 {
		if err := sqliteDeleteCalls(ctx, tx, ids); err != nil {
			return 0, false, fmt.Errorf("store: delete session %s: %w", id, err)
		}
	}
	gone := len(ids) < limit
	if gone {
		for _, q := range []string{
			`DELETE FROM approvals WHERE session_id = ?`,
			`DELETE FROM tasks WHERE session_id = ?`,
			`DELETE FROM scratchpad WHERE session_id = ?`,
			`DELETE FROM file_stamps WHERE session_id = ?`,
			`DELETE FROM sessions WHERE id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return 0, false, fmt.Errorf("store: delete session %s: %w", id, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("store: delete session %s: commit: %w", id, err)
	}
	return len(ids), gone, nil
}
