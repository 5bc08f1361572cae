package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// Eviction. Sessions are persisted, so the live map is a cache: a session nothing has
// used for Config.IdleTimeout is dropped from memory, and Get loads it again on its
// next use. A session is never evicted while something of it runs in this process:
// a batch (its calls, their approval and input waits, nested calls), a background
// call, an approved call run by RunApproved, a subscription to its events, or a job
// its sandbox still runs.
//
// Reloading rebuilds a session from its stored spec: whitelist, permission mode,
// rules (approvals' allow rules are written to the spec when granted), active tool
// groups. What lives only in memory is handled here:
//   - the turn's tool selection and the active skill are written with the spec (its
//     resume part) when they change (shared.go) and when the session is evicted, and
//     restored when it is loaded;
//   - the sandbox is released (Resources): finished jobs and their logs go with it;
//   - the file guard's read records are lost, as after a restart: a file must be read
//     again before it is overwritten;
//   - interrupts concern the batches running when they are made, and none runs.

// Resources is what tools hold for a session outside its calls (the sandbox).
type Resources interface {
	// Busy reports whether work of the session runs outside any call: a job.
	Busy(s *tool.Session) bool
	// Release frees what is held for the session; it is made again when needed.
	Release(ctx context.Context, s *tool.Session) error
}

// UseResources makes eviction keep sessions r says are busy and release what r holds
// for the others. Call it before Start.
func (m *Manager) UseResources(r Resources) { m.res = r }

// resumeState is what a session keeps in memory only that must outlive its eviction.
type resumeState struct {
	// Narrowed is the turn's narrowed tool list (Suggest, tool_expand_tools).
	Narrowed []string `json:"narrowed,omitempty"`
	// Skill and SkillAllowedTools are the active skill, which limits the tools.
	Skill             string   `json:"skill,omitempty"`
	SkillAllowedTools []string `json:"skill_allowed_tools,omitempty"`
}

// storedSpec is a session's record in the store: its spec and, once it was evicted
// holding some, its resume state. Clients never send it: they send a Spec.
type storedSpec struct {
	Spec
	Resume *resumeState `json:"resume,omitempty"`
}

// resume returns what must be kept of the session's memory, nil when nothing.
func (s *Session) resume() *resumeState {
	var r resumeState
	s.sel.mu.Lock()
	if s.sel.narrowed != nil {
		for n := range s.sel.narrowed {
			r.Narrowed = append(r.Narrowed, n)
		}
		sort.Strings(r.Narrowed)
	}
	s.sel.mu.Unlock()
	r.Skill, r.SkillAllowedTools = s.activeSkill().Current()
	if r.Narrowed == nil && r.Skill == "" {
		return nil
	}
	return &r
}

// restore applies what resume kept, to a session just built from the store.
func (s *Session) restore(r *resumeState) {
	s.mu.Lock()
	s.savedResume = r
	s.mu.Unlock()
	if r == nil {
		return
	}
	s.resumeStored = true
	if r.Narrowed != nil {
		s.Narrow(r.Narrowed)
	}
	if r.Skill != "" {
		s.activeSkill().Set(skills.Skill{Name: r.Skill, AllowedTools: r.SkillAllowedTools})
	}
}

// touch records a use of the session.
func (s *Session) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// hold keeps the session in memory until release is called (a call runs). A session
// evicted while its caller still held it is made live again, unless the store's copy
// was loaded meanwhile.
func (s *Session) hold() (release func()) {
	s.mu.Lock()
	s.holds++
	s.lastUsed = time.Now()
	evicted := s.evicted && !s.gone // a deleted session is not made live again
	s.evicted = false
	s.mu.Unlock()
	if evicted {
		// Wait until eviction has released what it held for the session (its jobs
		// would die with it), then make it live again; its resources are made anew.
		s.releasing.Lock()
		s.releasing.Unlock() //nolint:staticcheck // a barrier: wait for evict's release
		s.manager.mu.Lock()
		if _, ok := s.manager.live[s.ID]; !ok {
			s.manager.live[s.ID] = s
		}
		s.manager.mu.Unlock()
	}
	return func() {
		s.mu.Lock()
		s.holds--
		s.lastUsed = time.Now()
		gone := s.gone
		s.mu.Unlock()
		if gone {
			_ = s.manager.releaseGone(context.Background(), s)
		}
	}
}

// unused reports whether nothing holds the session, and since when it was last used.
func (s *Session) unused() (since time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastUsed, s.holds == 0 && len(s.subs) == 0
}

// Live returns how many sessions are in memory.
func (m *Manager) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// Start runs the sweeper: every quarter of the idle timeout (at most every minute) and
// whenever MaxLive is passed, it evicts; without an idle timeout or a cap it does not.
// With a notifier (UseNotifier) it also listens for other replicas' changes to
// sessions and interrupts of them. Stop ends it.
func (m *Manager) Start(ctx context.Context, log *slog.Logger) error {
	evicting := m.cfg.IdleTimeout != 0 || m.cfg.MaxLive != 0
	if !evicting && m.notifier == nil {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m.sweepMu.Lock()
	defer m.sweepMu.Unlock()
	if m.stop != nil {
		return errors.New("session: sweeper already started")
	}
	ctx, m.stop = context.WithCancel(ctx)
	m.done = make(chan struct{})
	// Subscribed before Start returns: no change made after it is missed.
	var changes, interrupts, background, backgroundApprovals <-chan string
	unsubscribe := func() {}
	if m.notifier != nil {
		var stopChanges, stopInterrupts, stopBackground, stopBackgroundApprovals func()
		changes, stopChanges = m.notifier.Subscribe(TopicSession)
		interrupts, stopInterrupts = m.notifier.Subscribe(TopicInterrupt)
		background, stopBackground = m.notifier.Subscribe(TopicBackground)
		backgroundApprovals, stopBackgroundApprovals = m.notifier.Subscribe(TopicBackgroundApproval)
		unsubscribe = func() { stopChanges(); stopInterrupts(); stopBackground(); stopBackgroundApprovals() }
	}
	var tick <-chan time.Time
	var ticker *time.Ticker
	if evicting {
		ticker = time.NewTicker(m.sweepInterval())
		tick = ticker.C
	}
	go func(done chan<- struct{}) {
		defer close(done)
		defer unsubscribe()
		if ticker != nil {
			defer ticker.Stop()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case payload, ok := <-changes:
				if !ok {
					changes = nil
				} else {
					m.heard(payload)
				}
				continue
			case payload, ok := <-interrupts:
				if !ok {
					interrupts = nil
				} else {
					m.heardInterrupt(payload)
				}
				continue
			case payload, ok := <-background:
				if !ok {
					background = nil
				} else {
					m.heardBackground(ctx, log, payload)
				}
				continue
			case payload, ok := <-backgroundApprovals:
				if !ok {
					backgroundApprovals = nil
				} else {
					m.heardBackgroundApproval(ctx, log, payload)
				}
				continue
			case <-tick:
			case <-m.kick:
				if !evicting {
					continue
				}
			}
			n, err := m.Sweep(ctx, time.Now())
			if err != nil && ctx.Err() == nil {
				log.Warn("evicting sessions", "err", err)
			}
			if n > 0 {
				log.Debug("sessions evicted from memory", "count", n, "live", m.Live())
			}
		}
	}(m.done)
	return nil
}

// Stop ends the sweeper and waits for it. It is idempotent.
func (m *Manager) Stop() {
	m.sweepMu.Lock()
	stop, done := m.stop, m.done
	m.sweepMu.Unlock()
	if stop != nil {
		stop()
		<-done
		m.readers.Wait()
	}
}

func (m *Manager) sweepInterval() time.Duration {
	if m.cfg.IdleTimeout <= 0 {
		return time.Minute
	}
	return min(max(m.cfg.IdleTimeout/4, time.Second), time.Minute)
}

// lruGrace: past MaxLive, a session used this recently is not evicted. A request
// holds a session only once its batch starts, a moment after Get returned it; the cap
// may be passed for a moment, never a session lost from under a request.
const lruGrace = 10 * time.Second

// Sweep evicts the sessions unused since before now minus the idle timeout, then, past
// MaxLive, the least recently used of the others that nothing holds and nothing used
// in the last lruGrace. It returns how
// many it evicted.
func (m *Manager) Sweep(ctx context.Context, now time.Time) (int, error) {
	type candidate struct {
		s    *Session
		seen time.Time
	}
	m.mu.Lock()
	sessions := make([]*Session, 0, len(m.live))
	for _, s := range m.live {
		sessions = append(sessions, s)
	}
	m.mu.Unlock()
	var idle, others []candidate
	for _, s := range sessions {
		seen, ok := s.unused()
		switch {
		case !ok:
		case m.cfg.IdleTimeout > 0 && now.Sub(seen) >= m.cfg.IdleTimeout:
			idle = append(idle, candidate{s, seen})
		case m.cfg.MaxLive > 0 && now.Sub(seen) >= lruGrace:
			others = append(others, candidate{s, seen})
		}
	}
	n := 0
	var errs []error
	for _, c := range idle {
		ok, err := m.evict(ctx, c.s, c.seen)
		if ok {
			n++
		}
		errs = append(errs, err)
	}
	if over := len(sessions) - n - m.cfg.MaxLive; m.cfg.MaxLive > 0 && over > 0 {
		slices.SortFunc(others, func(a, b candidate) int { return a.seen.Compare(b.seen) })
		for _, c := range others {
			if over == 0 {
				break
			}
			ok, err := m.evict(ctx, c.s, c.seen)
			if ok {
				n++
				over--
			}
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// evict drops s from memory unless its tools' resources are busy or it was used
// after seen. What it keeps only in memory is written to the store first; when that
// fails, s stays.
func (m *Manager) evict(ctx context.Context, s *Session, seen time.Time) (bool, error) {
	if m.res != nil && m.res.Busy(s.Info) {
		// A job runs: the idle clock starts again when it ends, so that its result
		// can still be read for a whole idle timeout after.
		s.touch()
		return false, nil
	}
	// Saving is no use of the session: the stored time stays its last use, so that
	// retention counts from that, not from the eviction.
	if _, err := m.saveResume(ctx, s, seen); errors.Is(err, store.ErrNotFound) {
		return true, m.forget(ctx, s) // another replica deleted it
	} else if err != nil {
		return false, err
	}
	m.mu.Lock()
	s.mu.Lock()
	ok := s.lastUsed.Equal(seen) && s.holds == 0 && len(s.subs) == 0 && m.live[s.ID] == s
	if ok {
		delete(m.live, s.ID)
		s.evicted = true
		s.releasing.Lock() // before s.mu is let go: a hold from now on waits for the release
	}
	s.mu.Unlock()
	m.mu.Unlock()
	if !ok {
		return false, nil
	}
	defer s.releasing.Unlock()
	if m.res == nil {
		return true, nil
	}
	if err := m.res.Release(ctx, s.Info); err != nil {
		return true, fmt.Errorf("session %s: releasing its resources: %w", s.ID, err)
	}
	return true, nil
}

// saveResume writes s's resume state into its stored spec, when it has one or the
// stored spec holds an old one, and reports whether it wrote. used is the session's
// last use, which the stored time becomes unless it is later already.
func (m *Manager) saveResume(ctx context.Context, s *Session, used time.Time) (bool, error) {
	r := s.resume()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r == nil && !s.resumeStored {
		return false, nil
	}
	wrote := false
	if _, err := m.rewrite(ctx, s.ID, used, func(st *storedSpec) bool {
		if reflect.DeepEqual(st.Resume, r) {
			wrote = false // already so (written by another replica, or unchanged)
			return false
		}
		st.Resume, wrote = r, true
		return true
	}); err != nil {
		return false, fmt.Errorf("session %s: saving its tool selection and skill: %w", s.ID, err)
	}
	s.resumeStored = r != nil
	s.savedResume = r
	return wrote, nil
}

// rewrite reads session id's stored spec, lets change alter it and, when change says
// so, writes it back with the use at used (the stored time never goes back); the
// caller holds the session's lock (so this process does not race itself). What
// other replicas wrote meanwhile is kept: the write is conditional on the spec read,
// and when another replica changed it in between, change is applied again to what
// that replica wrote (change may run more than once).
func (m *Manager) rewrite(ctx context.Context, id string, used time.Time, change func(*storedSpec) bool) (*storedSpec, error) {
	// Each conflict is another writer's success, so this ends; the bound is for a
	// store that answers conflict for ever.
	const attempts = 50
	for i := 0; ; i++ {
		rec, err := m.store.GetSession(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("reading the stored spec: %w", err)
		}
		var stored storedSpec
		if err := json.Unmarshal(rec.Spec, &stored); err != nil {
			return nil, fmt.Errorf("stored spec: %w", err)
		}
		if !change(&stored) {
			return &stored, nil
		}
		raw, err := json.Marshal(stored)
		if err != nil {
			return nil, err
		}
		err = m.store.UpdateSessionSpec(ctx, id, rec.Spec, raw, used.UTC())
		if errors.Is(err, store.ErrConflict) && i+1 < attempts {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &stored, nil
	}
}
