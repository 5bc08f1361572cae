package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// ErrBusy is returned by Delete for a session that has a call running or waiting
// (for a decision, an answer, its serial lock) or an approval pending.
var ErrBusy = errors.New("the session has calls that have not finished")

// ErrChanging is returned by Delete while the session is being loaded into memory or
// deleted by another request at that very moment: a retry shortly settles it.
var ErrChanging = errors.New("the session is being loaded or deleted at this moment")

// sessionDeleter is what Delete needs of the store (both stores have it). Unlike
// retention's DeleteUnusedSession, a background job still running does not keep
// the session: the client asked for it to go, and the job is killed.
type sessionDeleter interface {
	DeleteSession(ctx context.Context, id string, before time.Time, limit int) (calls int, gone bool, err error)
}

// deleteSkew is how far past now Delete's store check reaches: call records carry
// the times of the replicas that wrote them, whose clocks may run a little ahead.
const deleteSkew = time.Minute

// Delete deletes session id of tenant at its client's request: its call records,
// approvals, tasks and scratchpad, the directories the daemon made for it (a
// workdir the client named is left), and what its tools hold (its sandbox: a
// background job still running is killed). A session with a call that has not
// finished, here or on another replica, or an approval pending, is left: ErrBusy.
// Other replicas holding it find out on their next use of it.
func (m *Manager) Delete(ctx context.Context, tenant, id string) error {
	del, ok := m.store.(sessionDeleter)
	if !ok {
		return errors.New("session: this store cannot delete sessions")
	}
	rec, err := m.store.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && rec.Tenant != tenant) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("session: delete %s: %w", id, err)
	}
	// No load of it starts here from now on (lookup waits), and none is under way.
	m.mu.Lock()
	live := m.live[id]
	if m.deleting[id] != nil || m.loading[id] > 0 {
		m.mu.Unlock()
		return ErrChanging
	}
	busy := false
	if live != nil {
		live.mu.Lock()
		busy = live.holds > 0
		live.mu.Unlock()
	}
	if busy {
		m.mu.Unlock()
		return ErrBusy
	}
	// Out of live too: a Get now waits for the outcome instead of starting a call on
	// the live copy while its records go.
	delete(m.live, id)
	done := make(chan struct{})
	m.deleting[id] = done
	m.mu.Unlock()
	release := func(kept bool) {
		m.mu.Lock()
		if kept && live != nil {
			m.live[id] = live
		}
		delete(m.deleting, id)
		m.mu.Unlock()
		close(done)
	}
	before := time.Now().Add(deleteSkew)
	for {
		_, gone, err := del.DeleteSession(ctx, id, before, 0)
		switch {
		case errors.Is(err, store.ErrConflict):
			release(true)
			return ErrBusy
		case errors.Is(err, store.ErrNotFound): // deleted meanwhile (retention, another client)
		case err != nil:
			release(true)
			return fmt.Errorf("session: delete %s: %w", id, err)
		case !gone:
			continue // more call records than one transaction takes
		}
		break
	}
	release(false)
	m.changed(ctx, id) // other replicas look again, find nothing and forget theirs
	if live != nil {
		return m.forget(ctx, live) // its sandbox and directories, once nothing holds it
	}
	var spec storedSpec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		spec.Workdir = "?" // a spec that cannot be read may name a workdir: keep it
	}
	m.closeHeld(ctx, id)
	return m.removeDirs(id, spec.Workdir != "")
}

// Closer closes what a session's tools keep for it beyond an eviction, which the
// session gets back when it is loaded again: an MCP server's upstream session opened
// for it (pooling: per_session), with a browser's pages and logins, say. That lives
// on its own timeout; a deleted session has no use for it any more.
type Closer interface {
	CloseSession(ctx context.Context, id string)
}

// UseClosers has c told of every session deleted here: by its client, by
// retention, or by another replica (found out here). Call it before serving.
func (m *Manager) UseClosers(c ...Closer) { m.closers = append(m.closers, c...) }

// closeHeld tells the closers that session id is deleted.
func (m *Manager) closeHeld(ctx context.Context, id string) {
	for _, c := range m.closers {
		c.CloseSession(ctx, id)
	}
}
