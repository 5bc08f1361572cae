package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

var _ ArtifactStore = (*SQLite)(nil)

func (s *SQLite) RecordArtifact(ctx context.Context, a *Artifact) error {
	if a.Ref == "" || a.SessionID == "" || a.Tenant == "" || a.Owner == "" {
		return fmt.Errorf("store: record artifact: ref, session, tenant and owner are required: %w", ErrInvalid)
	}
	created := a.CreatedAt
	if created.IsZero() {
		created = now()
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO artifacts (ref, session_id, tenant, owner, created_at) VALUES (?, ?, ?, ?, ?)`,
		a.Ref, a.SessionID, a.Tenant, a.Owner, sqliteTime(created)); err != nil {
		return fmt.Errorf("store: record artifact %s: %w", a.Ref, err)
	}
	return nil
}

func (s *SQLite) GetArtifact(ctx context.Context, ref string) (*Artifact, error) {
	var (
		a       Artifact
		created string
	)
	err := s.r.QueryRowContext(ctx, `SELECT ref, session_id, tenant, owner, created_at FROM artifacts WHERE ref = ?`, ref).
		Scan(&a.Ref, &a.SessionID, &a.Tenant, &a.Owner, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: get artifact %s: %w", ref, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get artifact %s: %w", ref, err)
	}
	if a.CreatedAt, err = parseSQLiteTime(created); err != nil {
		return nil, fmt.Errorf("store: get artifact %s: created_at: %w", ref, err)
	}
	return &a, nil
}

func (s *SQLite) DeleteArtifact(ctx context.Context, ref, owner string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM artifacts WHERE ref = ? AND owner = ?`, ref, owner); err != nil {
		return fmt.Errorf("store: delete artifact %s: %w", ref, err)
	}
	return nil
}

func (s *SQLite) DeleteSessionArtifacts(ctx context.Context, session, owner string, before time.Time) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM artifacts WHERE session_id = ? AND owner = ? AND created_at < ?`,
		session, owner, sqliteTime(before)); err != nil {
		return fmt.Errorf("store: delete artifacts of session %s: %w", session, err)
	}
	return nil
}
