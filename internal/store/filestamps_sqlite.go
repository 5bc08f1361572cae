package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

var _ FileStampStore = (*SQLite)(nil)

// PutFileStamp implements FileStampStore. On one machine the session's stamps live
// in the process's memory; the file guard writes one here only when it must outlive
// the process (a call that depends on it waits for approval, and later stamps of a
// file it wrote one of), so this commit is not on the path of every read_file.
func (s *SQLite) PutFileStamp(ctx context.Context, sessionID, path string, st FileStamp) error {
	if sessionID == "" || path == "" {
		return fmt.Errorf("store: put file stamp: session and path are required: %w", ErrInvalid)
	}
	// A path is bytes on Linux and need not be UTF-8: a BLOB keeps it as it is.
	if _, err := s.w.ExecContext(ctx, `INSERT INTO file_stamps (session_id, path, size, mtime_ns, sha256, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (session_id, path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns,
			sha256 = excluded.sha256, updated_at = excluded.updated_at`,
		sessionID, []byte(path), st.Size, st.ModTime.UnixNano(), st.SHA256, sqliteTime(now())); err != nil {
		return fmt.Errorf("store: put file stamp: %w", err)
	}
	return nil
}

// GetFileStamp implements FileStampStore.
func (s *SQLite) GetFileStamp(ctx context.Context, sessionID, path string) (*FileStamp, error) {
	var st FileStamp
	var mtime int64
	err := s.r.QueryRowContext(ctx, `SELECT size, mtime_ns, sha256 FROM file_stamps WHERE session_id = ? AND path = ?`,
		sessionID, []byte(path)).Scan(&st.Size, &mtime, &st.SHA256)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: get file stamp: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get file stamp: %w", err)
	}
	st.ModTime = time.Unix(0, mtime)
	return &st, nil
}

// FileStampPaths implements FileStampStore.
func (s *SQLite) FileStampPaths(ctx context.Context, sessionID string) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT path FROM file_stamps WHERE session_id = ?`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("store: file stamp paths: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p []byte
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("store: file stamp paths: %w", err)
		}
		out = append(out, string(p))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: file stamp paths: %w", err)
	}
	return out, nil
}
