package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

const pgTaskColumns = `id, tenant, session_id, subject, description, status, owner, blocked_by, metadata, created_at, updated_at`

func scanPGTask(row pgx.Row) (*Task, error) {
	var (
		t             Task
		status        string
		blocked, meta []byte
	)
	if err := row.Scan(&t.ID, &t.Tenant, &t.SessionID, &t.Subject, &t.Description, &status, &t.Owner,
		&blocked, &meta, &t.CreatedAt, &t.UpdatedAt); err != nil {
		return nil, err
	}
	t.Status = TaskStatus(status)
	var err error
	if t.BlockedBy, err = decodeTaskIDs(blocked); err != nil {
		return nil, fmt.Errorf("blocked_by: %w", err)
	}
	if len(meta) > 0 {
		t.Metadata = meta
	}
	t.CreatedAt = t.CreatedAt.UTC()
	t.UpdatedAt = t.UpdatedAt.UTC()
	return &t, nil
}

// pgTaskGraph reads the dependency graph of a session inside tx.
func pgTaskGraph(ctx context.Context, tx pgx.Tx, tenant, sessionID string) (map[string][]string, error) {
	rows, err := tx.Query(ctx, `SELECT id, blocked_by FROM tasks WHERE tenant = $1 AND session_id = $2`, tenant, sessionID)
	if err != nil {
		return nil, err
	}
	graph := map[string][]string{}
	var (
		id      string
		blocked []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &blocked}, func() error {
		ids, err := decodeTaskIDs(blocked)
		if err != nil {
			return fmt.Errorf("task %s: blocked_by: %w", id, err)
		}
		graph[id] = ids
		return nil
	})
	return graph, err
}

// pgLockTaskGraph serializes the transactions that change a session's dependency
// graph, so two concurrent updates cannot each add half of a cycle.
func pgLockTaskGraph(ctx context.Context, tx pgx.Tx, tenant, sessionID string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('toolserverd.tasks:' || $1 || ':' || $2, 0))`,
		tenant, sessionID)
	return err
}

// CreateTask inserts t (see TaskStore). A duplicate id is ErrConflict.
func (p *Postgres) CreateTask(ctx context.Context, t *Task) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: create task: %w", err)
	}
	if err := prepareTask(t); err != nil {
		return fmt.Errorf("store: create task: %w", err)
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store: create task %s: begin: %w", t.ID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if len(t.BlockedBy) > 0 {
		// Tasks are never deleted and a new task has no dependants, so existence is
		// all there is to check, and it cannot change before the commit.
		graph, err := pgTaskGraph(ctx, tx, t.Tenant, t.SessionID)
		if err != nil {
			return fmt.Errorf("store: create task %s: %w", t.ID, err)
		}
		if err := checkBlockers(t.ID, t.BlockedBy, graph); err != nil {
			return fmt.Errorf("store: create task %s: %w", t.ID, err)
		}
	}
	_, err = tx.Exec(ctx, `INSERT INTO tasks (`+pgTaskColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		t.ID, t.Tenant, t.SessionID, t.Subject, t.Description, string(t.Status), t.Owner,
		encodeTaskIDs(t.BlockedBy), rawJSON(t.Metadata), utcMicro(t.CreatedAt), utcMicro(t.UpdatedAt))
	if isPGUniqueViolation(err) {
		return fmt.Errorf("store: create task %s: already exists: %w", t.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("store: create task %s: %w", t.ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("store: create task %s: commit: %w", t.ID, err)
	}
	return nil
}

func (p *Postgres) GetTask(ctx context.Context, tenant, sessionID, id string) (*Task, error) {
	t, err := scanPGTask(p.pool.QueryRow(ctx,
		`SELECT `+pgTaskColumns+` FROM tasks WHERE id = $1 AND tenant = $2 AND session_id = $3`, id, tenant, sessionID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: get task %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get task %s: %w", id, err)
	}
	return t, nil
}

// ListTasks returns the matching tasks by created_at, then insertion order. An unknown
// session has no tasks (not ErrNotFound).
func (p *Postgres) ListTasks(ctx context.Context, tenant, sessionID string, f TaskFilter) ([]*Task, error) {
	rows, err := p.pool.Query(ctx, `SELECT `+pgTaskColumns+` FROM tasks
		WHERE tenant = $1 AND session_id = $2 AND ($3 = '' OR status = $3) AND ($4 = '' OR owner = $4)
		ORDER BY created_at, seq`,
		tenant, sessionID, string(f.Status), f.Owner)
	if err != nil {
		return nil, fmt.Errorf("store: list tasks of %s: %w", sessionID, err)
	}
	defer rows.Close()
	tasks := []*Task{}
	for rows.Next() {
		t, err := scanPGTask(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list tasks of %s: %w", sessionID, err)
		}
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list tasks of %s: %w", sessionID, err)
	}
	return tasks, nil
}

// UpdateTask applies p (see TaskStore). The row is locked for the transaction; a
// change of BlockedBy also takes the session's graph lock before reading the graph.
func (p *Postgres) UpdateTask(ctx context.Context, tenant, sessionID, id string, patch TaskPatch) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: update task %s: %w", id, err)
	}
	if err := checkPatch(id, &patch); err != nil {
		return nil, fmt.Errorf("store: update task %s: %w", id, err)
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: update task %s: begin: %w", id, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if patch.SetBlockedBy && len(patch.BlockedBy) > 0 {
		if err := pgLockTaskGraph(ctx, tx, tenant, sessionID); err != nil {
			return nil, fmt.Errorf("store: update task %s: %w", id, err)
		}
	}
	t, err := scanPGTask(tx.QueryRow(ctx,
		`SELECT `+pgTaskColumns+` FROM tasks WHERE id = $1 AND tenant = $2 AND session_id = $3 FOR UPDATE`,
		id, tenant, sessionID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: update task %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: update task %s: %w", id, err)
	}
	if err := applyPatch(t, patch); err != nil {
		return nil, fmt.Errorf("store: update task %s: %w", id, err)
	}
	if patch.SetBlockedBy && len(t.BlockedBy) > 0 {
		graph, err := pgTaskGraph(ctx, tx, tenant, sessionID)
		if err != nil {
			return nil, fmt.Errorf("store: update task %s: %w", id, err)
		}
		if err := checkBlockers(id, t.BlockedBy, graph); err != nil {
			return nil, fmt.Errorf("store: update task %s: %w", id, err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET subject = $1, description = $2, status = $3, owner = $4,
		blocked_by = $5, metadata = $6, updated_at = $7 WHERE id = $8`,
		t.Subject, t.Description, string(t.Status), t.Owner, encodeTaskIDs(t.BlockedBy), rawJSON(t.Metadata),
		t.UpdatedAt, id); err != nil {
		return nil, fmt.Errorf("store: update task %s: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("store: update task %s: commit: %w", id, err)
	}
	return t, nil
}
