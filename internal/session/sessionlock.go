package session

import (
	"context"
	"errors"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// SessionLocker serializes a session's calls of tools that are not concurrency-safe
// across processes: replicas sharing one database serve the same session, and the
// in-process serial lock only orders the calls of one replica. A lock must be
// released when its holder dies (PostgreSQL advisory locks die with the connection).
type SessionLocker interface {
	// LockSession waits until sessionID's lock is free, or ctx ends; unlock is called
	// exactly once.
	LockSession(ctx context.Context, sessionID string) (unlock func(), err error)
}

// UseSessionLocks makes unsafe calls also take l's session lock, after the
// in-process one. Call it before serving.
func (x *Executor) UseSessionLocks(l SessionLocker) { x.locks = l }

// lockAcross takes the cross-replica lock of sess for c. On failure it returns the
// result to answer instead of running c.
func (x *Executor) lockAcross(ctx context.Context, sess *Session, c *Call) (unlock func(), res *tool.Result) {
	if x.locks == nil {
		return func() {}, nil
	}
	unlock, err := x.locks.LockSession(ctx, sess.ID)
	switch {
	case err == nil:
		return unlock, nil
	case cancelledByRequest(ctx):
		return nil, notStarted(ctx, c)
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return nil, tool.ErrorResult(tool.KindCancelled, "%s was cancelled while waiting for the session's previous call to finish", c.Name)
	}
	x.log.Error("taking the session lock failed; the call was not run", "call_id", c.ID, "session_id", sess.ID, "err", err)
	return nil, tool.ErrorResult(tool.KindUnavailable, "%s was not run: the session's lock could not be taken (%v); try again shortly", c.Name, err)
}
