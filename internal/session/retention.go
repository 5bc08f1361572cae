package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// Retention (config retention.sessions). A session nothing has used for the retention
// is deleted: its stored record with everything of its own (store.Retention says
// what), the workspace directory the daemon made for it under Config.WorkspaceDir and
// its artifacts directory under Config.ArtifactDir. A workdir the client named is
// never touched: it is the client's checkout.
//
// Eviction only drops a session from memory; this deletes it. What counts as a use
// has to be visible to every replica, so it is the store's updated_at: written when
// the session is created or its spec changes and, with retention on, when it is used
// (touchStored, touchLoaded): a use of a session whose stored time is touchEvery old
// writes it. The sweep writes it too for the live sessions something holds (a call,
// a subscription, a job). So the stored time is at most touchEvery behind the last
// use, and a session is deleted once it is older than the retention plus touchEvery.
// The store deletes only under the session row's lock and after checking again that
// it is unused (no unfinished or recent call, none whose background job streams on,
// no pending approval): a replica that touched it first keeps it, and one that
// touches it after finds it gone.
//
// In this process a session that is live, or that Get is loading, is not deleted;
// a Get that arrives while it is being deleted waits for the outcome (lookup).
// A session another replica deleted while this one held it live is forgotten here
// when this replica learns it (a use recorded or read finds no row, an eviction
// cannot save its selection): dropped, its sandbox released, its directories here
// removed.

// RetentionStore is what deleting unused sessions needs of the store.
type RetentionStore interface {
	UnusedSessions(ctx context.Context, before time.Time, after *store.Session, limit int) ([]*store.Session, error)
	TouchSession(ctx context.Context, id string, at time.Time) error
	DeleteUnusedSession(ctx context.Context, id string, before time.Time, limit int) (calls int, gone bool, err error)
	ExistingSessions(ctx context.Context, ids []string) ([]string, error)
}

type retention struct {
	store      RetentionStore
	after      time.Duration // unused this long: deleted
	touchEvery time.Duration // a use is written to the store when the stored one is this old
}

// UseRetention makes the manager record sessions' uses in st and lets DeleteUnused
// delete the sessions unused for after. after <= 0 turns retention off. Call it
// before serving.
func (m *Manager) UseRetention(st RetentionStore, after time.Duration) {
	if after <= 0 || st == nil {
		m.retention = nil
		return
	}
	m.retention = &retention{store: st, after: after, touchEvery: touchEvery(after)}
}

// touchEvery: an eighth of the retention (a session outlives its last use by at most
// that much more), at least a second, at most an hour (one write an hour for a
// session in constant use).
func touchEvery(after time.Duration) time.Duration {
	return min(max(after/8, time.Second), time.Hour)
}

// touchStored records a use of the live session s in the store when the stored time
// is touchEvery old. A session the store no longer has was deleted by another
// replica: it is forgotten (forget) and not found. Other failures are ignored (the
// next use tries again).
func (m *Manager) touchStored(ctx context.Context, s *Session) error {
	r := m.retention
	if r == nil {
		return nil
	}
	now := time.Now()
	s.mu.Lock()
	due := now.Sub(s.storedUsed) >= r.touchEvery
	s.mu.Unlock()
	if !due {
		return nil
	}
	err := r.store.TouchSession(ctx, s.ID, now.UTC())
	switch {
	case err == nil:
		s.mu.Lock()
		if now.After(s.storedUsed) {
			s.storedUsed = now
		}
		s.mu.Unlock()
	case errors.Is(err, store.ErrNotFound):
		_ = m.forget(ctx, s)
		return ErrNotFound
	}
	return nil
}

// forget drops the live session s, which the store no longer has: another replica's
// retention deleted it while this process held it unused (each replica's sweep
// records the use of what it holds, so that is rare). Once nothing holds it, at once
// or when its last call or subscription here ends, what its tools hold for it is
// released (its sandbox, a finished job's output) and the directories this process
// made for it removed (another replica removed those in its own data dir).
func (m *Manager) forget(ctx context.Context, s *Session) error {
	m.mu.Lock()
	if m.live[s.ID] == s {
		delete(m.live, s.ID)
	}
	m.mu.Unlock()
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
	return m.releaseGone(ctx, s)
}

// releaseGone releases what is held for s, which the store no longer has, when
// nothing holds s. Each time: a call that held s meanwhile may have made a sandbox
// again.
func (m *Manager) releaseGone(ctx context.Context, s *Session) error {
	s.mu.Lock()
	idle := s.gone && s.holds == 0 && len(s.subs) == 0
	named := s.Spec.Workdir != ""
	s.mu.Unlock()
	if !idle {
		return nil
	}
	var errs []error
	if m.res != nil {
		if err := m.res.Release(ctx, s.Info); err != nil {
			errs = append(errs, fmt.Errorf("session %s: releasing its resources: %w", s.ID, err))
		}
	}
	m.closeHeld(ctx, s.ID)
	errs = append(errs, m.removeDirs(s.ID, named))
	return errors.Join(errs...)
}

// touchLoaded records the use of a session Get is loading, when its stored time is
// touchEvery old, and returns the stored time as it is now.
func (m *Manager) touchLoaded(ctx context.Context, rec *store.Session) (time.Time, error) {
	r := m.retention
	now := time.Now()
	if r == nil || now.Sub(rec.UpdatedAt) < r.touchEvery {
		return rec.UpdatedAt, nil
	}
	err := r.store.TouchSession(ctx, rec.ID, now.UTC())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return time.Time{}, ErrNotFound
	case err != nil:
		return rec.UpdatedAt, nil
	}
	return now, nil
}

// retentionPage is how many candidate sessions the sweep reads at once.
const retentionPage = 500

// DeleteUnused deletes the sessions unused since now minus the retention (and
// touchEvery: see above), and returns how many sessions and call records it deleted.
// Before that it records the use of the live sessions something holds, and evicts
// the live ones unused for the retention so that they can go. Without retention
// (UseRetention) it does nothing.
func (m *Manager) DeleteUnused(ctx context.Context, now time.Time) (sessions, calls int, err error) {
	r := m.retention
	if r == nil {
		return 0, 0, nil
	}
	var errs []error
	errs = append(errs, m.retainLive(ctx, now))
	// Two steps: after+touchEvery overflows for the longest durations ("2562047h"),
	// and would put the cutoff in the future; time.Add saturates instead.
	cutoff := now.Add(-r.after).Add(-r.touchEvery).UTC()
	var after *store.Session
	for {
		page, err := r.store.UnusedSessions(ctx, cutoff, after, retentionPage)
		if err != nil {
			errs = append(errs, err)
			break
		}
		for _, rec := range page {
			gone, n, err := m.deleteUnused(ctx, rec, cutoff)
			if gone {
				sessions++
			}
			calls += n
			if err != nil {
				errs = append(errs, err)
			}
		}
		if len(page) < retentionPage || ctx.Err() != nil {
			break
		}
		after = page[len(page)-1]
	}
	if ctx.Err() == nil {
		errs = append(errs, m.removeOrphanDirs(ctx, cutoff))
	}
	return sessions, calls, errors.Join(errs...)
}

// daemonSessionID matches the ids the daemon gives sessions (NewID("ses_")), so the
// names of the directories it makes for them.
var daemonSessionID = regexp.MustCompile(`^ses_[a-z2-7]{26}$`)

// removeOrphanDirs removes the directories the daemon made for sessions (workspace,
// artifacts) that the store no longer has and that nothing changed since before
// cutoff: left when the process ended between deleting a session and removing
// them, or on a replica that held a session another replica deleted and never
// learned it. The age keeps the directory of a session being created (made a moment
// before its row is committed); the store's answer keeps the directories of the
// sessions that exist, whichever replica uses them; a session this process holds
// live or is loading or deleting is left to forget and deleteUnused.
func (m *Manager) removeOrphanDirs(ctx context.Context, cutoff time.Time) error {
	var errs []error
	for _, dir := range []string{m.cfg.WorkspaceDir, m.cfg.ArtifactDir} {
		if dir == "" {
			continue
		}
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("session: listing %s: %w", dir, err))
			continue
		}
		var old []string
		for _, e := range entries {
			if !e.IsDir() || !daemonSessionID.MatchString(e.Name()) {
				continue // symbolic links included: not made by the daemon
			}
			if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
				old = append(old, e.Name())
			}
		}
		for chunk := range slices.Chunk(old, retentionPage) {
			if ctx.Err() != nil {
				return errors.Join(errs...)
			}
			errs = append(errs, m.removeOrphans(ctx, dir, chunk))
		}
	}
	return errors.Join(errs...)
}

// removeOrphans removes the directories in dir of those of ids the store does not
// have.
func (m *Manager) removeOrphans(ctx context.Context, dir string, ids []string) error {
	existing, err := m.retention.store.ExistingSessions(ctx, ids)
	if err != nil {
		return fmt.Errorf("session: looking for the sessions of directories in %s: %w", dir, err)
	}
	stored := make(map[string]bool, len(existing))
	for _, id := range existing {
		stored[id] = true
	}
	var errs []error
	for _, id := range ids {
		if stored[id] {
			continue
		}
		m.mu.Lock()
		_, live := m.live[id]
		busy := live || m.loading[id] > 0 || m.deleting[id] != nil
		m.mu.Unlock()
		if busy {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, id)); err != nil {
			errs = append(errs, fmt.Errorf("session %s: removing its directory left in %s: %w", id, dir, err))
		}
	}
	return errors.Join(errs...)
}

// retainLive writes the use of the live sessions something holds or runs a job for,
// and evicts the live ones nothing used for the retention.
func (m *Manager) retainLive(ctx context.Context, now time.Time) error {
	r := m.retention
	m.mu.Lock()
	sessions := make([]*Session, 0, len(m.live))
	for _, s := range m.live {
		sessions = append(sessions, s)
	}
	m.mu.Unlock()
	var errs []error
	for _, s := range sessions {
		seen, unused := s.unused()
		busy := m.res != nil && m.res.Busy(s.Info)
		switch {
		case busy:
			// As evict does: the clock starts again when the job ends, so that its
			// output stays readable for the retention after.
			s.touch()
			_ = m.touchStored(ctx, s)
		case !unused:
			_ = m.touchStored(ctx, s)
		case now.Sub(seen) >= r.after:
			if _, err := m.evict(ctx, s, seen); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// deleteUnused deletes one candidate unless this process has it live or is loading
// it, then the directories the daemon made for it (removeDirs). gone reports that this
// call deleted the session; calls, how many call records went with it.
func (m *Manager) deleteUnused(ctx context.Context, rec *store.Session, cutoff time.Time) (gone bool, calls int, err error) {
	id := rec.ID
	m.mu.Lock()
	_, live := m.live[id]
	if live || m.loading[id] > 0 || m.deleting[id] != nil {
		m.mu.Unlock()
		return false, 0, nil
	}
	done := make(chan struct{})
	m.deleting[id] = done
	m.mu.Unlock()
	release := func() {
		m.mu.Lock()
		delete(m.deleting, id)
		m.mu.Unlock()
		close(done)
	}
	for {
		n, deleted, err := m.retention.store.DeleteUnusedSession(ctx, id, cutoff, 0)
		calls += n
		switch {
		case errors.Is(err, store.ErrConflict): // used meanwhile, maybe on another replica
			release()
			return false, calls, nil
		case errors.Is(err, store.ErrNotFound): // another replica deleted it
		case err != nil:
			release()
			return false, calls, fmt.Errorf("session %s: deleting it: %w", id, err)
		case !deleted:
			continue // more call records than one transaction takes
		default:
			gone = true
		}
		break
	}
	// From here the store does not have the session: a Get finds nothing, so nothing
	// makes its directory again, and the waiting ones can go on.
	release()
	// A spec that cannot be read keeps its workspace: it may name a workdir.
	var spec storedSpec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		spec.Workdir = "?"
	}
	m.closeHeld(ctx, id)
	if err := m.removeDirs(id, spec.Workdir != ""); err != nil {
		return gone, calls, err
	}
	return gone, calls, nil
}

// removeDirs deletes the directories the daemon made for a deleted session: its
// artifacts directory, and its workspace unless it named its own workdir.
func (m *Manager) removeDirs(id string, namedWorkdir bool) error {
	if !sessionDirName(id) {
		return nil // not a name the daemon could have made a directory of
	}
	var errs []error
	if m.cfg.ArtifactDir != "" {
		if err := os.RemoveAll(filepath.Join(m.cfg.ArtifactDir, id)); err != nil {
			errs = append(errs, fmt.Errorf("session %s: removing its artifacts: %w", id, err))
		}
	}
	if !namedWorkdir {
		if err := os.RemoveAll(filepath.Join(m.cfg.WorkspaceDir, id)); err != nil {
			errs = append(errs, fmt.Errorf("session %s: removing its workspace: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// sessionDirName reports whether id can name a directory directly inside another.
func sessionDirName(id string) bool {
	return filepath.IsLocal(id) && !strings.ContainsAny(id, `/\`) && !strings.HasPrefix(id, ".")
}
