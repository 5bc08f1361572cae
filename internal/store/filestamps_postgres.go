package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var _ FileStampStore = (*Postgres)(nil)

func (p *Postgres) PutFileStamp(ctx context.Context, sessionID, path string, s FileStamp) error {
	if sessionID == "" || path == "" {
		return fmt.Errorf("store: put file stamp: session and path are required: %w", ErrInvalid)
	}
	// A path is bytes on Linux and need not be UTF-8, which a text column refuses.
	// Every read_file writes one of these, so its commit does not wait for the WAL to
	// reach the disk (synchronous_commit off for this transaction only): the row is
	// visible to the other replicas at once, and one lost to a crash of PostgreSQL
	// costs the model a read_file, never a write the guard should have refused.
	if _, err := p.pool.Exec(ctx, `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
		INSERT INTO file_stamps (session_id, path, size, mtime_ns, sha256, updated_at)
		SELECT $1, $2, $3, $4, $5, $6 FROM async
		ON CONFLICT (session_id, path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns,
			sha256 = excluded.sha256, updated_at = excluded.updated_at`,
		sessionID, []byte(path), s.Size, s.ModTime.UnixNano(), s.SHA256, now()); err != nil {
		return fmt.Errorf("store: put file stamp: %w", err)
	}
	return nil
}

func (p *Postgres) GetFileStamp(ctx context.Context, sessionID, path string) (*FileStamp, error) {
	var s FileStamp
	var mtime int64
	err := p.pool.QueryRow(ctx, `SELECT size, mtime_ns, sha256 FROM file_stamps WHERE session_id = $1 AND path = $2`,
		sessionID, []byte(path)).Scan(&s.Size, &mtime, &s.SHA256)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: get file stamp: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get file stamp: %w", err)
	}
	s.ModTime = time.Unix(0, mtime)
	return &s, nil
}

// FileStampPaths implements FileStampStore.
func (p *Postgres) FileStampPaths(ctx context.Context, sessionID string) ([]string, error) {
	rows, err := p.pool.Query(ctx, `SELECT path FROM file_stamps WHERE session_id = $1`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("store: file stamp paths: %w", err)
	}
	paths, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("store: file stamp paths: %w", err)
	}
	out := make([]string, len(paths))
	for i, b := range paths {
		out[i] = string(b)
	}
	return out, nil
}
