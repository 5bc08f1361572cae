package store

import (
	"context"
	"time"
)

// Artifact records which replica holds a tool_chain artifact. The artifact is a file
// in that replica's data_dir; an artifact_read that reaches another replica finds the
// owner here.
type Artifact struct {
	Ref       string
	SessionID string
	Tenant    string
	// Owner is the id of the replica holding the artifact.
	Owner     string
	CreatedAt time.Time
}

// ArtifactStore keeps artifact owners, for replicas sharing a PostgreSQL store (one
// process on SQLite holds every artifact itself and needs none).
// An artifact's row goes when the owner evicts the artifact, when its owner's replica
// row is forgotten, or with its session (retention).
type ArtifactStore interface {
	// RecordArtifact fails with ErrInvalid when a field is empty; the owner must
	// have heartbeated.
	RecordArtifact(ctx context.Context, a *Artifact) error
	// GetArtifact returns ErrNotFound for an unknown reference.
	GetArtifact(ctx context.Context, ref string) (*Artifact, error)
	// DeleteArtifact deletes ref's row if owner holds it (a replica forgets only
	// what it holds); an unknown ref, or another owner's, is no error.
	DeleteArtifact(ctx context.Context, ref, owner string) error
	// DeleteSessionArtifacts deletes the rows of the artifacts of session that owner
	// holds and recorded before before (its sweep deleted them; one recorded since
	// is a new artifact of the session).
	DeleteSessionArtifacts(ctx context.Context, session, owner string, before time.Time) error
}
