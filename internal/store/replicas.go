package store

import (
	"context"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Replica is a daemon process sharing the database with others.
type Replica struct {
	ID string
	// Address is the replica's advertised base URL (http://10.0.0.7:8080), where the
	// others forward reads of what only it holds (live output of its calls).
	Address   string
	StartedAt time.Time
	LastSeen  time.Time // by the database's clock
	// Silent is how long ago LastSeen was, by the database's clock (so that replicas
	// whose clocks disagree still agree on whose lease ran out), as GetReplica read it.
	Silent time.Duration
}

// ExpiredCall is a call failed because its owner stopped heartbeating.
type ExpiredCall struct {
	ID    string
	Owner string
}

// ReplicaStore keeps the replicas' heartbeats and fails the calls of the ones that
// stopped. Only PostgreSQL has it: SQLite is one machine, where a restarted process
// fails its own leftovers (AbandonCalls). Every time is the database's clock, so the
// replicas' clocks need not agree.
type ReplicaStore interface {
	// Heartbeat records that replica id, reachable at address, is alive now.
	// startedAt is written when the row is created.
	Heartbeat(ctx context.Context, id, address string, startedAt time.Time) error
	// GetReplica returns ErrNotFound for an id that never heartbeated.
	GetReplica(ctx context.Context, id string) (*Replica, error)
	// ExpireReplicas finishes as failed, with result(owner, started), every pending or
	// running call owned by a replica other than self whose last heartbeat is older
	// than lease; started tells running calls from pending ones, which never ran. Each call is failed once however many replicas sweep at the same time
	// (a conditional update); the returned calls are the ones this sweep failed.
	ExpireReplicas(ctx context.Context, self string, lease time.Duration, result func(owner string, started bool) *tool.Result) ([]ExpiredCall, error)
	// LeaveReplica marks replica id gone, as one whose lease ran out long ago: the
	// others then serve its finished calls from the record, and their next sweep
	// fails its unfinished calls and forgets its row. A replica calls it for itself
	// when it stops cleanly, once its records are written. ErrNotFound for an id
	// that never heartbeated.
	LeaveReplica(ctx context.Context, id string) error
}
