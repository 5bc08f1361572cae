package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var _ ArtifactStore = (*Postgres)(nil)

func (p *Postgres) RecordArtifact(ctx context.Context, a *Artifact) error {
	if a.Ref == "" || a.SessionID == "" || a.Tenant == "" || a.Owner == "" {
		return fmt.Errorf("store: record artifact: ref, session, tenant and owner are required: %w", ErrInvalid)
	}
	created := a.CreatedAt
	if created.IsZero() {
		created = now()
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO artifacts (ref, session_id, tenant, owner, created_at) VALUES ($1, $2, $3, $4, $5)`,
		a.Ref, a.SessionID, a.Tenant, a.Owner, utcMicro(created)); err != nil {
		return fmt.Errorf("store: record artifact %s: %w", a.Ref, err)
	}
	return nil
}

func (p *Postgres) GetArtifact(ctx context.Context, ref string) (*Artifact, error) {
	var a Artifact
	err := p.pool.QueryRow(ctx, `SELECT ref, session_id, tenant, owner, created_at FROM artifacts WHERE ref = $1`, ref).
		Scan(&a.Ref, &a.SessionID, &a.Tenant, &a.Owner, &a.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: get artifact %s: %w", ref, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get artifact %s: %w", ref, err)
	}
	a.CreatedAt = a.CreatedAt.UTC()
	return &a, nil
}

func (p *Postgres) DeleteArtifact(ctx context.Context, ref, owner string) error {
	if _, err := p.pool.Exec(ctx, `DELETE FROM artifacts WHERE ref = $1 AND owner = $2`, ref, owner); err != nil {
		return fmt.Errorf("store: delete artifact %s: %w", ref, err)
	}
	return nil
}

func (p *Postgres) DeleteSessionArtifacts(ctx context.Context, session, owner string, before time.Time) error {
	if _, err := p.pool.Exec(ctx, `DELETE FROM artifacts WHERE session_id = $1 AND owner = $2 AND created_at < $3`,
		session, owner, utcMicro(before)); err != nil {
		return fmt.Errorf("store: delete artifacts of session %s: %w", session, err)
	}
	return nil
}
