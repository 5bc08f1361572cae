package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SQLite full-text search: memories_fts is an external-content FTS5 table over
// memories (key, content, tags), kept in step by triggers. bm25() ranks: lower is
// better, and the columns weigh key 4, content 1, tags 2. Term statistics are over
// all tenants' memories (one index); the tenant filter decides what is returned.

const sqliteMemoryColumns = `m.id, m.tenant, m.session_id, m.key, m.content, m.tags, m.created_at, m.updated_at`

func scanSQLiteMemory(row interface{ Scan(...any) error }, extra ...any) (*Memory, error) {
	var (
		m                Memory
		key              sql.NullString
		tags             []byte
		created, updated string
	)
	dest := append([]any{&m.ID, &m.Tenant, &m.SessionID, &key, &m.Content, &tags, &created, &updated}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	m.Key = key.String
	var err error
	if m.Tags, err = decodeTags(tags); err != nil {
		return nil, fmt.Errorf("tags: %w", err)
	}
	if m.CreatedAt, err = parseSQLiteTime(created); err != nil {
		return nil, fmt.Errorf("created_at: %w", err)
	}
	if m.UpdatedAt, err = parseSQLiteTime(updated); err != nil {
		return nil, fmt.Errorf("updated_at: %w", err)
	}
	return &m, nil
}

// SaveMemory inserts or replaces by key (see MemoryStore). A duplicate id is ErrConflict.
func (s *SQLite) SaveMemory(ctx context.Context, m *Memory) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("store: save memory: %w", err)
	}
	if err := prepareMemory(m); err != nil {
		return false, fmt.Errorf("store: save memory: %w", err)
	}
	var id, created string
	err := s.w.QueryRowContext(ctx, `INSERT INTO memories (id, tenant, session_id, key, content, tags, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, key) WHERE key IS NOT NULL DO UPDATE SET
			session_id = excluded.session_id, content = excluded.content, tags = excluded.tags,
			updated_at = excluded.updated_at
		RETURNING id, created_at`,
		m.ID, m.Tenant, m.SessionID, nullKey(m.Key), m.Content, encodeTags(m.Tags),
		sqliteTime(m.CreatedAt), sqliteTime(m.UpdatedAt)).Scan(&id, &created)
	if isSQLiteUniqueViolation(err) {
		return false, fmt.Errorf("store: save memory %s: already exists: %w", m.ID, ErrConflict)
	}
	if err != nil {
		return false, fmt.Errorf("store: save memory %s: %w", m.ID, err)
	}
	replaced := id != m.ID
	m.ID = id
	if m.CreatedAt, err = parseSQLiteTime(created); err != nil {
		return false, fmt.Errorf("store: save memory %s: created_at: %w", m.ID, err)
	}
	return replaced, nil
}

// SearchMemory ranks the tenant's memories with bm25 (see MemoryStore).
func (s *SQLite) SearchMemory(ctx context.Context, tenant, query string, limit int) ([]MemoryHit, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: search memory: %w", err)
	}
	hits := []MemoryHit{}
	terms := searchTerms(query)
	if len(terms) == 0 {
		return hits, nil
	}
	if limit <= 0 {
		limit = DefaultMemorySearchLimit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+sqliteMemoryColumns+`, bm25(memories_fts, 4.0, 1.0, 2.0) AS rank
		FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid
		WHERE memories_fts MATCH ? AND m.tenant = ?
		ORDER BY rank, m.updated_at DESC, m.seq DESC
		LIMIT ?`, fts5Query(terms), tenant, limit)
	if err != nil {
		return nil, fmt.Errorf("store: search memory: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rank float64
		m, err := scanSQLiteMemory(rows, &rank)
		if err != nil {
			return nil, fmt.Errorf("store: search memory: %w", err)
		}
		hits = append(hits, MemoryHit{Memory: *m, Score: -rank})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: search memory: %w", err)
	}
	return hits, nil
}

func (s *SQLite) DeleteMemory(ctx context.Context, tenant, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM memories WHERE id = ? AND tenant = ?`, id, tenant)
	if err != nil {
		return fmt.Errorf("store: delete memory %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: delete memory %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("store: delete memory %s: %w", id, ErrNotFound)
	}
	return nil
}

// ScratchpadSet creates or replaces a key (see ScratchpadStore). The writer's
// transaction makes the count and the insert atomic.
func (s *SQLite) ScratchpadSet(ctx context.Context, sessionID, key, value string, maxKeys int) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("store: scratchpad set: %w", err)
	}
	if err := checkScratchpadKey(sessionID, key); err != nil {
		return false, fmt.Errorf("store: scratchpad set: %w", err)
	}
	if err := checkStoredText("scratchpad value", value); err != nil {
		return false, fmt.Errorf("store: scratchpad set %q: %w", key, err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("store: scratchpad set %q: begin: %w", key, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var exists, count int
	if err := tx.QueryRowContext(ctx,
		`SELECT count(*) FILTER (WHERE key = ?), count(*) FROM scratchpad WHERE session_id = ?`,
		key, sessionID).Scan(&exists, &count); err != nil {
		return false, fmt.Errorf("store: scratchpad set %q: %w", key, err)
	}
	if exists == 0 && maxKeys > 0 && count >= maxKeys {
		return false, fmt.Errorf("store: scratchpad set %q: %d keys: %w", key, count, ErrScratchpadFull)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO scratchpad (session_id, key, value, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		sessionID, key, value, sqliteTime(now())); err != nil {
		return false, fmt.Errorf("store: scratchpad set %q: %w", key, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("store: scratchpad set %q: commit: %w", key, err)
	}
	return exists == 0, nil
}

func (s *SQLite) ScratchpadGet(ctx context.Context, sessionID, key string) (*ScratchpadEntry, error) {
	e := ScratchpadEntry{Key: key}
	var updated string
	err := s.r.QueryRowContext(ctx, `SELECT value, updated_at FROM scratchpad WHERE session_id = ? AND key = ?`,
		sessionID, key).Scan(&e.Value, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: scratchpad get: %w", errScratchpadKeyMissing(key))
	}
	if err != nil {
		return nil, fmt.Errorf("store: scratchpad get %q: %w", key, err)
	}
	if e.UpdatedAt, err = parseSQLiteTime(updated); err != nil {
		return nil, fmt.Errorf("store: scratchpad get %q: updated_at: %w", key, err)
	}
	return &e, nil
}

func (s *SQLite) ScratchpadDelete(ctx context.Context, sessionID, key string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM scratchpad WHERE session_id = ? AND key = ?`, sessionID, key)
	if err != nil {
		return fmt.Errorf("store: scratchpad delete %q: %w", key, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: scratchpad delete %q: %w", key, err)
	} else if n == 0 {
		return fmt.Errorf("store: scratchpad delete: %w", errScratchpadKeyMissing(key))
	}
	return nil
}

func (s *SQLite) ScratchpadList(ctx context.Context, sessionID string) ([]ScratchpadKey, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT key, length(CAST(value AS BLOB)), updated_at FROM scratchpad
		WHERE session_id = ? ORDER BY key`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("store: scratchpad list: %w", err)
	}
	defer rows.Close()
	keys := []ScratchpadKey{}
	for rows.Next() {
		var (
			k       ScratchpadKey
			updated string
		)
		if err := rows.Scan(&k.Key, &k.Size, &updated); err != nil {
			return nil, fmt.Errorf("store: scratchpad list: %w", err)
		}
		if k.UpdatedAt, err = parseSQLiteTime(updated); err != nil {
			return nil, fmt.Errorf("store: scratchpad list: updated_at: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: scratchpad list: %w", err)
	}
	return keys, nil
}
