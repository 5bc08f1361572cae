// Package store persists sessions and tool-call records. Two implementations share one
// contract and one conformance suite: embedded SQLite (the zero-setup default) and
// PostgreSQL (production, several replicas).
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// ErrNotFound is returned when a record does not exist (or belongs to another tenant).
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a conditional write found the record in another state.
var ErrConflict = errors.New("conflict")

// ErrAlreadyFinal is GroupCommitter.Finish's answer when the call's record was already
// final (succeeded or failed) and the finish was not written: the record keeps its
// first result. On PostgreSQL that happens to a replica that lost its lease (the
// others marked its running calls failed) and to a call a restart marked failed.
// Nothing was written; the record, not the finish, is what survives.
var ErrAlreadyFinal = errors.New("the call's record is already final")

// Session is a persisted session. Spec is the session's creation request as JSON
// (whitelist, permission mode, workdir, metadata); the store does not interpret it.
type Session struct {
	ID        string
	Tenant    string
	Spec      json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// CallStatus is where a tool call is in its life.
type CallStatus string

const (
	CallPending   CallStatus = "pending"   // accepted, not started
	CallRunning   CallStatus = "running"   // executing on Owner
	CallWaiting   CallStatus = "waiting"   // waiting for a person (approval, external answer)
	CallSucceeded CallStatus = "succeeded" // finished, result is not an error
	CallFailed    CallStatus = "failed"    // finished with an is_error result
)

// Terminal reports whether the status is final.
func (s CallStatus) Terminal() bool { return s == CallSucceeded || s == CallFailed }

// Call is the durable record of one tool call.
type Call struct {
	ID         string // daemon id, tc_…
	SessionID  string
	Tenant     string
	ToolCallID string // the model's id, unique within the session
	Name       string
	Arguments  json.RawMessage
	Status     CallStatus
	Result     *tool.Result // full, untruncated; nil until finished
	ErrorKind  tool.ErrorKind
	Owner      string // replica that runs it
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
	// OutputOpen says the call finished while its output goes on (a background job
	// it started still streams under the call's id); cleared when that output closes.
	OutputOpen bool
}

// AbandonedCall is a call AbandonCalls marked failed.
type AbandonedCall struct {
	ID        string
	SessionID string
	Name      string
	CreatedAt time.Time
	// Started says it was running (it may have run partly); else it was pending and
	// never ran.
	Started bool
}

// CallFinish is the final state of a call.
type CallFinish struct {
	ID         string
	Status     CallStatus // CallSucceeded or CallFailed
	Result     *tool.Result
	FinishedAt time.Time
	// OutputOpen marks the call's output as still open (Call.OutputOpen);
	// CloseCallOutput clears it.
	OutputOpen bool
}

// Store is the persistence contract. Every method honours ctx.
type Store interface {
	CreateSession(ctx context.Context, s *Session) error
	// GetSession returns ErrNotFound for an unknown id.
	GetSession(ctx context.Context, id string) (*Session, error)
	// UpdateSessionSpec replaces a session's spec (rules added by approvals, active
	// groups) if it is still prev, byte for byte as GetSession returned it; if another
	// writer (another replica) changed it since, it returns ErrConflict and writes
	// nothing, so that a read-change-write never drops that writer's change. Its
	// updated_at becomes at, unless it is later already: a writer that says when the
	// session was last used (eviction) does not make it younger.
	UpdateSessionSpec(ctx context.Context, id string, prev, spec json.RawMessage, at time.Time) error

	// WriteCalls inserts new call records and finishes existing ones in one transaction.
	// A finish of a call that is already terminal is ignored (the first result wins).
	// It is the unit of group commit (see GroupCommitter).
	WriteCalls(ctx context.Context, inserts []*Call, finishes []CallFinish) error
	// GetCall returns ErrNotFound for an unknown id.
	GetCall(ctx context.Context, id string) (*Call, error)
	// GetCallByToolCallID finds the newest call with the model's id in a session.
	GetCallByToolCallID(ctx context.Context, sessionID, toolCallID string) (*Call, error)
	// ListCalls returns a page of a session's calls, newest first (CallPage).
	ListCalls(ctx context.Context, sessionID string, p CallPage) ([]*Call, error)
	// ListRecentCalls returns a tenant's calls across sessions, newest first.
	ListRecentCalls(ctx context.Context, f CallFilter) ([]*Call, error)
	// AbandonCalls finishes every pending or running call of owner as failed, a running
	// one with the given result and a pending one, which never started, with
	// NotStartedResult: used at start-up for calls a previous process left behind.
	// It returns the calls it finished, oldest first, so that the start-up log can
	// name them. It also clears the OutputOpen mark of owner's calls: the process that
	// held their output open is gone.
	AbandonCalls(ctx context.Context, owner string, result *tool.Result, at time.Time) ([]AbandonedCall, error)
	// CloseCallOutput clears a call's OutputOpen mark (its output closed). An unknown
	// id or a call not marked is no error.
	CloseCallOutput(ctx context.Context, id string) error

	// Retention deletes old call records and unused sessions (retention.go).
	Retention

	// Ping checks the store is reachable.
	Ping(ctx context.Context) error
	Close() error
}
