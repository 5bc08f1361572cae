package store

import (
	"context"
	"time"
)

// Job records which replica runs a background job. The job's process and output logs
// live on that replica only; a request about the job that reaches another replica
// finds the owner here.
type Job struct {
	ID        string
	SessionID string
	Tenant    string
	// Owner is the id of the replica running the job.
	Owner     string
	CreatedAt time.Time
}

// JobStore keeps job owners. Only PostgreSQL has it, like ReplicaStore: on one
// machine every job is in the one process. A job's row goes when its owner's replica
// row is forgotten.
type JobStore interface {
	// RecordJob fails with ErrInvalid when a field is empty; the owner must have
	// heartbeated.
	RecordJob(ctx context.Context, j *Job) error
	// GetJob returns ErrNotFound for an unknown id.
	GetJob(ctx context.Context, id string) (*Job, error)
}
