package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

const sqliteTaskColumns = `id, tenant, session_id, subject, description, status, owner, blocked_by, metadata, created_at, updated_at`

func scanSQLiteTask(row interface{ Scan(...any) error }) (*Task, error) {
	var (
		t                Task
		status           string
		blocked, meta    []byte
		created, updated string
	)
	if err := row.Scan(&t.ID, &t.Tenant, &t.SessionID, &t.Subject, &t.Description, &status, &t.Owner,
		&blocked, &meta, &created, &updated); err != nil {
		return nil, err
	}
	t.Status = TaskStatus(status)
	var err error
	if t.BlockedBy, err = decodeTaskIDs(blocked); err != nil {
		return nil, fmt.Errorf("blocked_by: %w", err)
	}
	if len(meta) > 0 {
		t.Metadata = append([]byte(nil), meta...)
	}
	if t.CreatedAt, err = parseSQLiteTime(created); err != nil {
		return nil, fmt.Errorf("created_at: %w", err)
	}
	if t.UpdatedAt, err = parseSQLiteTime(updated); err != nil {
		return nil, fmt.Errorf("updated_at: %w", err)
	}
	return &t, nil
}

// sqliteTaskGraph reads the dependency graph of a session inside tx.
func sqliteTaskGraph(ctx context.Context, tx *sql.Tx, tenant, sessionID string) (map[string][]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, blocked_by FROM tasks WHERE tenant = ? AND session_id = ?`, tenant, sessionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	graph := map[string][]string{}
	for rows.Next() {
		var (
			id      string
			blocked []byte
		)
		if err := rows.Scan(&id, &blocked); err != nil {
			return nil, err
		}
		if graph[id], err = decodeTaskIDs(blocked); err != nil {
			return nil, fmt.Errorf("task %s: blocked_by: %w", id, err)
		}
	}
	return graph, rows.Err()
}

// CreateTask inserts t (see TaskStore). A duplicate id is ErrConflict.
func (s *SQLite) CreateTask(ctx context.Context, t *Task) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: create task: %w", err)
	}
	if err := prepareTask(t); err != nil {
		return fmt.Errorf("store: create task: %w", err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: create task %s: begin: %w", t.ID, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if len(t.BlockedBy) > 0 {
		graph, err := sqliteTaskGraph(ctx, tx, t.Tenant, t.SessionID)
		if err != nil {
			return fmt.Errorf("store: create task %s: %w", t.ID, err)
		}
		if err := checkBlockers(t.ID, t.BlockedBy, graph); err != nil {
			return fmt.Errorf("store: create task %s: %w", t.ID, err)
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO tasks (`+sqliteTaskColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Tenant, t.SessionID, t.Subject, t.Description, string(t.Status), t.Owner,
		encodeTaskIDs(t.BlockedBy), sqliteText(t.Metadata), sqliteTime(t.CreatedAt), sqliteTime(t.UpdatedAt))
	if isSQLiteUniqueViolation(err) {
		return fmt.Errorf("store: create task %s: already exists: %w", t.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("store: create task %s: %w", t.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: create task %s: commit: %w", t.ID, err)
	}
	return nil
}

func (s *SQLite) GetTask(ctx context.Context, tenant, sessionID, id string) (*Task, error) {
	t, err := scanSQLiteTask(s.r.QueryRowContext(ctx,
		`SELECT `+sqliteTaskColumns+` FROM tasks WHERE id = ? AND tenant = ? AND session_id = ?`, id, tenant, sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: get task %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get task %s: %w", id, err)
	}
	return t, nil
}

// ListTasks returns the matching tasks by created_at, then insertion order. An unknown
// session has no tasks (not ErrNotFound).
func (s *SQLite) ListTasks(ctx context.Context, tenant, sessionID string, f TaskFilter) ([]*Task, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+sqliteTaskColumns+` FROM tasks
		WHERE tenant = ? AND session_id = ? AND (? = '' OR status = ?) AND (? = '' OR owner = ?)
		ORDER BY created_at, seq`,
		tenant, sessionID, string(f.Status), string(f.Status), f.Owner, f.Owner)
	if err != nil {
		return nil, fmt.Errorf("store: list tasks of %s: %w", sessionID, err)
	}
	defer rows.Close()
	tasks := []*Task{}
	for rows.Next() {
		t, err := scanSQLiteTask(rows)
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

// UpdateTask applies p (see TaskStore). The writer's transaction serializes it with
// every other write, so the dependency check sees the graph it changes.
func (s *SQLite) UpdateTask(ctx context.Context, tenant, sessionID, id string, p TaskPatch) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: update task %s: %w", id, err)
	}
	if err := checkPatch(id, &p); err != nil {
		return nil, fmt.Errorf("store: update task %s: %w", id, err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: update task %s: begin: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	t, err := scanSQLiteTask(tx.QueryRowContext(ctx,
		`SELECT `+sqliteTaskColumns+` FROM tasks WHERE id = ? AND tenant = ? AND session_id = ?`, id, tenant, sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: update task %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: update task %s: %w", id, err)
	}
	if err := applyPatch(t, p); err != nil {
		return nil, fmt.Errorf("store: update task %s: %w", id, err)
	}
	if p.SetBlockedBy && len(t.BlockedBy) > 0 {
		graph, err := sqliteTaskGraph(ctx, tx, tenant, sessionID)
		if err != nil {
			return nil, fmt.Errorf("store: update task %s: %w", id, err)
		}
		if err := checkBlockers(id, t.BlockedBy, graph); err != nil {
			return nil, fmt.Errorf("store: update task %s: %w", id, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET subject = ?, description = ?, status = ?, owner = ?,
		blocked_by = ?, metadata = ?, updated_at = ? WHERE id = ?`,
		t.Subject, t.Description, string(t.Status), t.Owner, encodeTaskIDs(t.BlockedBy), sqliteText(t.Metadata),
		sqliteTime(t.UpdatedAt), id); err != nil {
		return nil, fmt.Errorf("store: update task %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: update task %s: commit: %w", id, err)
	}
	return t, nil
}
