package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/approval"
	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/store"
)

// Sessions are shared through the store. Every change a turn makes to a session is
// written to its stored spec when it is made: rules an approval adds (AllowRules),
// tool groups (reset_tools), and, in the spec's resume part, the narrowed tool list
// (a ranked listing, tool_expand_tools) and the active skill (SaveState). So they
// hold after a restart, and a replica loading the session sees them. A replica that
// holds the session live already learns of a change from the notifier (TopicSession)
// and reads the stored spec again before the session's next use (refresh).
// Notifications can be lost (see store.Notifier) and arrive after the next request:
// on a store replicas share, a live session is also checked against the store at
// every use (ReadThrough), so a change is in force on every replica from the answer
// of the request that made it.

// TopicSession is notified when a session's stored state changed; the payload is the
// session id and the replica that changed it, separated by a space.
const TopicSession = "session"

// TopicInterrupt is notified when a session is interrupted (Manager.Interrupt); the
// payload is the session id, the replica that took the interrupt and its message,
// separated by spaces (the message, which may hold spaces, last).
const TopicInterrupt = "session_interrupt"

// maxInterruptNotice is how much of an interrupt's message reaches the other
// replicas: a notification holds less than 8000 bytes.
const maxInterruptNotice = 4 << 10

// Interrupt makes every batch of the session running now skip the calls it has not
// started yet, here and, through the notifier, on the other replicas: behind a
// Service the interrupt lands on any replica, not on the one running the batch. A
// notification can be lost (see store.Notifier); an interrupt is not retried.
func (m *Manager) Interrupt(ctx context.Context, s *Session, message string) {
	s.Interrupt(message)
	if m.notifier == nil {
		return
	}
	if len(message) > maxInterruptNotice {
		message = strings.ToValidUTF8(message[:maxInterruptNotice], "")
	}
	_ = m.notifier.Notify(context.WithoutCancel(ctx), TopicInterrupt, s.ID+" "+m.replica+" "+message)
}

// heardInterrupt interrupts the live session another replica's notification names.
func (m *Manager) heardInterrupt(payload string) {
	id, rest, _ := strings.Cut(payload, " ")
	replica, message, _ := strings.Cut(rest, " ")
	if id == "" || replica == m.replica {
		return // a resynchronisation (nothing to redo), or this process's own
	}
	m.mu.Lock()
	s, ok := m.live[id]
	m.mu.Unlock()
	if ok {
		s.Interrupt(message)
	}
}

// UseNotifier makes the manager tell other replicas of its changes to sessions and
// listen for theirs (from Start); replica names this process. Call it before Start.
func (m *Manager) UseNotifier(n store.Notifier, replica string) {
	m.notifier, m.replica = n, replica
}

// ReadThrough makes every use of a live session read its stored spec and apply it
// when another replica changed it, instead of waiting for the notification: a
// backend whose next request reaches another replica a moment after the answer
// would otherwise be served the session as it was (a skill opened, a rule added or
// a tool list narrowed on the first replica not yet in force). For stores that
// replicas share; it costs one read of the session per use. Call it before Start.
func (m *Manager) ReadThrough() { m.readThrough = true }

// syncStored applies the stored spec of a live session when it is not the one the
// session last applied (ReadThrough).
func (m *Manager) syncStored(ctx context.Context, s *Session) error {
	rec, err := m.store.GetSession(ctx, s.ID)
	if err != nil {
		return fmt.Errorf("session %s: reading its stored state: %w", s.ID, err)
	}
	s.mu.Lock()
	same := bytes.Equal(rec.Spec, s.applied)
	s.mu.Unlock()
	if same {
		return nil
	}
	return m.apply(s, rec)
}

// changed tells the other replicas that session id's stored state changed.
func (m *Manager) changed(ctx context.Context, id string) {
	if m.notifier != nil {
		_ = m.notifier.Notify(context.WithoutCancel(ctx), TopicSession, id+" "+m.replica)
	}
}

// SaveState writes what the session holds in memory only — the narrowed tool list
// and the active skill — into its stored spec when it differs from what is stored.
func (m *Manager) SaveState(ctx context.Context, s *Session) error {
	wrote, err := m.saveResume(ctx, s, time.Now())
	if wrote {
		m.changed(ctx, s.ID)
	}
	return err
}

// heard marks the live session a notification names as changed elsewhere; an empty
// payload (notifications may have been missed) marks every live session.
func (m *Manager) heard(payload string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if payload == "" {
		for _, s := range m.live {
			s.stale.Store(true)
		}
		return
	}
	id, replica, _ := strings.Cut(payload, " ")
	if replica == m.replica {
		return // this process's own change
	}
	if s, ok := m.live[id]; ok {
		s.stale.Store(true)
	}
}

// refresh reads the stored spec of a session another replica changed and applies
// what may change: rules, active groups, narrowed tools and active skill.
func (m *Manager) refresh(ctx context.Context, s *Session) error {
	s.stale.Store(false) // first: a change heard during the read marks it again
	rec, err := m.store.GetSession(ctx, s.ID)
	if err != nil {
		s.stale.Store(true)
		return fmt.Errorf("session %s: reading what another replica changed: %w", s.ID, err)
	}
	return m.apply(s, rec)
}

// apply makes the live session s hold what its stored record says may change.
func (m *Manager) apply(s *Session, rec *store.Session) error {
	var stored storedSpec
	if err := json.Unmarshal(rec.Spec, &stored); err != nil {
		return fmt.Errorf("session %s: stored spec: %w", s.ID, err)
	}
	rules, err := stored.Spec.Rules.parse()
	if err != nil {
		return fmt.Errorf("session %s: stored rules: %w", s.ID, err)
	}
	groups := map[string]bool{}
	for _, g := range stored.Spec.ActiveGroups {
		if m.hasGroup(g) {
			groups[g] = true
		}
	}
	local := s.resume()
	s.mu.Lock()
	s.Spec.Rules, s.rules = stored.Spec.Rules, append([]approval.Rule(nil), rules...)
	s.Spec.ActiveGroups, s.groups = stored.Spec.ActiveGroups, groups
	s.resumeStored = stored.Resume != nil
	s.applied = rec.Spec
	// A narrowed list or skill changed here and not saved yet (its save follows)
	// is newer than the stored one: kept, and written by that save.
	unsaved := !sameResume(local, s.savedResume)
	if !unsaved {
		s.savedResume = stored.Resume
	}
	s.mu.Unlock()
	if unsaved {
		return nil
	}
	r := stored.Resume
	if r == nil {
		r = &resumeState{}
	}
	s.Narrow(r.Narrowed)
	s.activeSkill().Set(skills.Skill{Name: r.Skill, AllowedTools: r.SkillAllowedTools})
	return nil
}

// sameResume compares two resume parts, an absent one and an empty one alike.
func sameResume(a, b *resumeState) bool {
	if a == nil {
		a = &resumeState{}
	}
	if b == nil {
		b = &resumeState{}
	}
	return slices.Equal(a.Narrowed, b.Narrowed) && a.Skill == b.Skill && slices.Equal(a.SkillAllowedTools, b.SkillAllowedTools)
}
