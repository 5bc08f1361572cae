package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL full-text search: memories.search is a stored generated tsvector (key
// weight A, tag strings B, content C, 'english' configuration) with a GIN index. The
// query is websearch_to_tsquery over the query's words joined by "or", ranked by
// ts_rank_cd (cover density) normalized by 1 + log(document length) (flag 1), so a
// long memory that happens to contain one word does not outrank a short, focused one.

const pgMemoryColumns = `id, tenant, session_id, key, content, tags, created_at, updated_at`

func scanPGMemory(row pgx.Row, extra ...any) (*Memory, error) {
	var (
		m    Memory
		key  *string
		tags []byte
	)
	dest := append([]any{&m.ID, &m.Tenant, &m.SessionID, &key, &m.Content, &tags, &m.CreatedAt, &m.UpdatedAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if key != nil {
		m.Key = *key
	}
	var err error
	if m.Tags, err = decodeTags(tags); err != nil {
		return nil, fmt.Errorf("tags: %w", err)
	}
	m.CreatedAt = m.CreatedAt.UTC()
	m.UpdatedAt = m.UpdatedAt.UTC()
	return &m, nil
}

// SaveMemory inserts or replaces by key (see MemoryStore). A duplicate id is ErrConflict.
func (p *Postgres) SaveMemory(ctx context.Context, m *Memory) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("store: save memory: %w", err)
	}
	if err := prepareMemory(m); err != nil {
		return false, fmt.Errorf("store: save memory: %w", err)
	}
	var id string
	err := p.pool.QueryRow(ctx, `INSERT INTO memories (id, tenant, session_id, key, content, tags, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (tenant, key) WHERE key IS NOT NULL DO UPDATE SET
			session_id = excluded.session_id, content = excluded.content, tags = excluded.tags,
			updated_at = excluded.updated_at
		RETURNING id, created_at`,
		m.ID, m.Tenant, m.SessionID, nullKey(m.Key), m.Content, encodeTags(m.Tags), m.CreatedAt, m.UpdatedAt,
	).Scan(&id, &m.CreatedAt)
	if isPGUniqueViolation(err) {
		return false, fmt.Errorf("store: save memory %s: already exists: %w", m.ID, ErrConflict)
	}
	if err != nil {
		return false, fmt.Errorf("store: save memory %s: %w", m.ID, err)
	}
	replaced := id != m.ID
	m.ID = id
	m.CreatedAt = m.CreatedAt.UTC()
	return replaced, nil
}

// SearchMemory ranks the tenant's memories with ts_rank_cd (see MemoryStore).
func (p *Postgres) SearchMemory(ctx context.Context, tenant, query string, limit int) ([]MemoryHit, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: search memory: %w", err)
	}
	hits := []MemoryHit{}
	q := pgWebQuery(searchTerms(query))
	if q == "" {
		return hits, nil
	}
	if limit <= 0 {
		limit = DefaultMemorySearchLimit
	}
	rows, err := p.pool.Query(ctx, `SELECT `+pgMemoryColumns+`, ts_rank_cd(search, q, 1) AS score
		FROM memories, websearch_to_tsquery('english', $2) AS q
		WHERE tenant = $1 AND search @@ q
		ORDER BY score DESC, updated_at DESC, seq DESC
		LIMIT $3`, tenant, q, limit)
	if err != nil {
		return nil, fmt.Errorf("store: search memory: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var score float32
		m, err := scanPGMemory(rows, &score)
		if err != nil {
			return nil, fmt.Errorf("store: search memory: %w", err)
		}
		hits = append(hits, MemoryHit{Memory: *m, Score: float64(score)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: search memory: %w", err)
	}
	return hits, nil
}

func (p *Postgres) DeleteMemory(ctx context.Context, tenant, id string) error {
	tag, err := p.pool.Exec(ctx, `DELETE FROM memories WHERE id = $1 AND tenant = $2`, id, tenant)
	if err != nil {
		return fmt.Errorf("store: delete memory %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: delete memory %s: %w", id, ErrNotFound)
	}
	return nil
}

// ScratchpadSet creates or replaces a key (see ScratchpadStore). With a key limit, a
// transaction-scoped advisory lock per session makes the count and the insert atomic
// across connections and replicas.
func (p *Postgres) ScratchpadSet(ctx context.Context, sessionID, key, value string, maxKeys int) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("store: scratchpad set: %w", err)
	}
	if err := checkScratchpadKey(sessionID, key); err != nil {
		return false, fmt.Errorf("store: scratchpad set: %w", err)
	}
	if err := checkStoredText("scratchpad value", value); err != nil {
		return false, fmt.Errorf("store: scratchpad set %q: %w", key, err)
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("store: scratchpad set %q: begin: %w", key, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if maxKeys > 0 {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('toolserverd.scratchpad:' || $1, 0))`,
			sessionID); err != nil {
			return false, fmt.Errorf("store: scratchpad set %q: lock: %w", key, err)
		}
		var exists bool
		var count int
		if err := tx.QueryRow(ctx,
			`SELECT coalesce(bool_or(key = $1), false), count(*) FROM scratchpad WHERE session_id = $2`,
			key, sessionID).Scan(&exists, &count); err != nil {
			return false, fmt.Errorf("store: scratchpad set %q: %w", key, err)
		}
		if !exists && count >= maxKeys {
			return false, fmt.Errorf("store: scratchpad set %q: %d keys: %w", key, count, ErrScratchpadFull)
		}
	}
	// xmax = 0 marks a row this statement inserted (an update leaves the locking
	// transaction's id there).
	var created bool
	if err := tx.QueryRow(ctx, `INSERT INTO scratchpad (session_id, key, value, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
		RETURNING xmax = 0`, sessionID, key, value, now()).Scan(&created); err != nil {
		return false, fmt.Errorf("store: scratchpad set %q: %w", key, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("store: scratchpad set %q: commit: %w", key, err)
	}
	return created, nil
}

func (p *Postgres) ScratchpadGet(ctx context.Context, sessionID, key string) (*ScratchpadEntry, error) {
	e := ScratchpadEntry{Key: key}
	err := p.pool.QueryRow(ctx, `SELECT value, updated_at FROM scratchpad WHERE session_id = $1 AND key = $2`,
		sessionID, key).Scan(&e.Value, &e.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: scratchpad get: %w", errScratchpadKeyMissing(key))
	}
	if err != nil {
		return nil, fmt.Errorf("store: scratchpad get %q: %w", key, err)
	}
	e.UpdatedAt = e.UpdatedAt.UTC()
	return &e, nil
}

func (p *Postgres) ScratchpadDelete(ctx context.Context, sessionID, key string) error {
	tag, err := p.pool.Exec(ctx, `DELETE FROM scratchpad WHERE session_id = $1 AND key = $2`, sessionID, key)
	if err != nil {
		return fmt.Errorf("store: scratchpad delete %q: %w", key, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: scratchpad delete: %w", errScratchpadKeyMissing(key))
	}
	return nil
}

// ScratchpadList orders keys with the C collation: byte order, as in SQLite.
func (p *Postgres) ScratchpadList(ctx context.Context, sessionID string) ([]ScratchpadKey, error) {
	rows, err := p.pool.Query(ctx, `SELECT key, octet_length(value), updated_at FROM scratchpad
		WHERE session_id = $1 ORDER BY key COLLATE "C"`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("store: scratchpad list: %w", err)
	}
	keys := []ScratchpadKey{}
	var k ScratchpadKey
	if _, err := pgx.ForEachRow(rows, []any{&k.Key, &k.Size, &k.UpdatedAt}, func() error {
		k.UpdatedAt = k.UpdatedAt.UTC()
		keys = append(keys, k)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: scratchpad list: %w", err)
	}
	return keys, nil
}
