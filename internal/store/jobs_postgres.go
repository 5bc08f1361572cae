package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

var _ JobStore = (*Postgres)(nil)

func (p *Postgres) RecordJob(ctx context.Context, j *Job) error {
	if j.ID == "" || j.SessionID == "" || j.Tenant == "" || j.Owner == "" {
		return fmt.Errorf("store: record job: id, session, tenant and owner are required: %w", ErrInvalid)
	}
	created := j.CreatedAt
	if created.IsZero() {
		created = now()
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO jobs (id, session_id, tenant, owner, created_at) VALUES ($1, $2, $3, $4, $5)`,
		j.ID, j.SessionID, j.Tenant, j.Owner, utcMicro(created)); err != nil {
		return fmt.Errorf("store: record job %s: %w", j.ID, err)
	}
	return nil
}

func (p *Postgres) GetJob(ctx context.Context, id string) (*Job, error) {
	var j Job
	err := p.pool.QueryRow(ctx, `SELECT id, session_id, tenant, owner, created_at FROM jobs WHERE id = $1`, id).
		Scan(&j.ID, &j.SessionID, &j.Tenant, &j.Owner, &j.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: get job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get job %s: %w", id, err)
	}
	j.CreatedAt = j.CreatedAt.UTC()
	return &j, nil
}
