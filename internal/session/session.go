// Package session holds sessions (a whitelist of tools over the global registries plus
// per-session state) and runs batches of tool calls for them.
package session

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolserverd/toolserverd/internal/approval"
	"github.com/toolserverd/toolserverd/internal/globset"
	"github.com/toolserverd/toolserverd/internal/rank"
	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// ErrNotFound is returned for an unknown session.
var ErrNotFound = errors.New("session not found")

// ErrInvalid wraps a problem with a session spec the client can fix.
var ErrInvalid = errors.New("invalid session")

// Permission modes.
var permissionModes = map[string]bool{"default": true, "accept_edits": true, "explore": true, "bypass": true, "dont_ask": true}

// Spec is what a client asks for when it creates a session.
type Spec struct {
	// AvailableTools is the whitelist: exact names and glob patterns. Absent means
	// every tool; an empty list means none.
	AvailableTools []string `json:"available_tools"`
	// AvailableSkills: absent (null) means every skill, [] none. Not omitempty: the
	// stored spec must keep [] apart from absent, or a reload opens every skill.
	AvailableSkills []string       `json:"available_skills"`
	PermissionMode  string         `json:"permission_mode,omitempty"`
	Workdir         string         `json:"workdir,omitempty"`
	Metadata        map[string]any `json:"metadata,omitempty"`
	// Rules are the session's own permission rules (`execute_command(git status:*)`);
	// approvals "for session" and "with rule" add allow rules here.
	Rules *RuleSet `json:"rules,omitempty"`
	// ActiveGroups are the tool groups switched on (basic is always on); reset_tools
	// changes them.
	ActiveGroups []string `json:"active_groups,omitempty"`
}

// RuleSet holds permission rules by action.
type RuleSet struct {
	Allow []string `json:"allow,omitempty"`
	Ask   []string `json:"ask,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

func (r *RuleSet) parse() ([]approval.Rule, error) {
	if r == nil {
		return nil, nil
	}
	var out []approval.Rule
	for _, g := range []struct {
		action approval.Outcome
		list   []string
	}{{approval.Allow, r.Allow}, {approval.Ask, r.Ask}, {approval.Deny, r.Deny}} {
		rules, err := approval.ParseRules(g.action, g.list)
		if err != nil {
			return nil, fmt.Errorf("%w: rules.%s: %v", ErrInvalid, g.action, err)
		}
		out = append(out, rules...)
	}
	return out, nil
}

// Session is a live session.
type Session struct {
	ID        string
	Tenant    string
	Spec      Spec
	CreatedAt time.Time
	Tools     *ToolProxy
	// Skills is the session's view of the skills; nil without a skill registry.
	Skills *skills.Proxy
	// Info is what tools see of the session.
	Info *tool.Session

	// serial admits one call at a time of tools that are not concurrency-safe.
	serial chan struct{}
	// serialHolder is the call holding serial (this process's), for the event that
	// says what a queued call waits behind. Guarded by mu.
	serialHolder *Call

	mu           sync.Mutex
	rules        []approval.Rule
	groups       map[string]bool // active tool groups
	sel          selection
	manager      *Manager
	interruptSeq uint64
	interruptMsg string
	subs         map[chan Event]struct{}
	// streamsSince is when the session's streams here last went from none to some;
	// remoteResults the other replicas' background calls whose results they were
	// sent since (background.go). Both reset when the last stream closes.
	streamsSince    time.Time
	remoteResults   sentSet
	remoteApprovals sentSet // their approval requests sent, likewise

	// What eviction looks at (see evict.go).
	holds        int          // calls of the session running or waiting in this process
	lastUsed     time.Time    // last Get, or end of a call or subscription
	evicted      bool         // dropped from the manager's live sessions
	gone         bool         // the store no longer has it: another replica deleted it (retention.go)
	releasing    sync.Mutex   // held by evict while it releases the session's resources
	resumeStored bool         // the stored spec carries a resume part
	stale        atomic.Bool  // another replica changed the stored spec (shared.go)
	applied      []byte       // the stored spec last applied from the store (ReadThrough)
	savedResume  *resumeState // the resume part as last saved or applied from the store
	storedUsed   time.Time    // the stored updated_at as this process last wrote or read it (retention.go)
}

// Subscribe receives the session's events that belong to no request: results of
// background calls. Events are dropped for a subscriber whose buffer is full (the
// call record always has the result). cancel ends the subscription.
func (s *Session) Subscribe(buf int) (events <-chan Event, cancel func()) {
	ch := make(chan Event, max(buf, 1))
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[chan Event]struct{}{}
	}
	if len(s.subs) == 0 {
		s.streamsSince = time.Now()
	}
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.subs, ch)
		if len(s.subs) == 0 {
			s.remoteResults, s.remoteApprovals = sentSet{}, sentSet{}
		}
		s.lastUsed = time.Now()
		gone := s.gone
		s.mu.Unlock()
		if gone {
			_ = s.manager.releaseGone(context.Background(), s)
		}
	}
}

func (s *Session) publish(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// CurrentSpec returns the session's spec as it is now (approvals add rules to it).
func (s *Session) CurrentSpec() Spec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Spec
}

// ReadOnly reports whether the session's permission mode lets it change nothing
// (explore), for tool.Context.ReadOnly.
func (s *Session) ReadOnly() bool {
	return approval.Mode(s.CurrentSpec().PermissionMode) == approval.ModeExplore
}

// Rules returns the session's permission rules.
func (s *Session) Rules() []approval.Rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rules
}

// Interrupt makes every batch running now skip the calls it has not started yet.
func (s *Session) Interrupt(message string) {
	s.mu.Lock()
	s.interruptSeq++
	s.interruptMsg = message
	s.mu.Unlock()
}

// interruptedSince reports whether Interrupt was called after seq was read, and why.
func (s *Session) interruptedSince(seq uint64) (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.interruptSeq > seq, s.interruptMsg
}

func (s *Session) currentSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.interruptSeq
}

// Store is the persistence the session registry needs.
type Store interface {
	CreateSession(ctx context.Context, s *store.Session) error
	GetSession(ctx context.Context, id string) (*store.Session, error)
	UpdateSessionSpec(ctx context.Context, id string, prev, spec json.RawMessage, at time.Time) error
}

// Config of the session registry.
type Config struct {
	// DataDir is the daemon's data directory (its database, keys, workspaces and
	// artifacts): a session may not name a workdir inside it. Empty: only
	// WorkspaceDir and ArtifactDir are refused.
	DataDir string
	// WorkspaceDir holds a fresh working directory per session that names none.
	WorkspaceDir string
	// ArtifactDir holds a directory per session, named by its id, that tools fill
	// (tool_chain's artifacts, data_dir/artifacts); retention deletes a session's with
	// it. Empty: none.
	ArtifactDir string
	// WorkdirRoots are the directories a session may name as its workdir (or a
	// directory under them). Empty: sessions get only their own workspace.
	WorkdirRoots []string
	// Groups are the tool groups sessions switch with reset_tools.
	Groups []Group
	// IdleTimeout drops a session from memory when nothing has used it for this long
	// and nothing of it runs; its next use loads it from the store. 0 keeps sessions
	// in memory for the life of the process.
	IdleTimeout time.Duration
	// MaxLive caps the sessions kept in memory: past it the least recently used of
	// those that could be evicted are, before they are idle. 0: no cap.
	MaxLive int
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.WorkspaceDir == "" || !filepath.IsAbs(c.WorkspaceDir) {
		return fmt.Errorf("session: workspace dir must be an absolute path, got %q", c.WorkspaceDir)
	}
	if c.DataDir != "" && !filepath.IsAbs(c.DataDir) {
		return fmt.Errorf("session: data dir must be an absolute path, got %q", c.DataDir)
	}
	if c.ArtifactDir != "" && !filepath.IsAbs(c.ArtifactDir) {
		return fmt.Errorf("session: artifact dir must be an absolute path, got %q", c.ArtifactDir)
	}
	for _, r := range c.WorkdirRoots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("session: workdir root must be an absolute path, got %q", r)
		}
	}
	if c.IdleTimeout < 0 {
		return fmt.Errorf("session: idle timeout must not be negative, got %s", c.IdleTimeout)
	}
	if c.MaxLive < 0 {
		return fmt.Errorf("session: max live sessions must not be negative, got %d", c.MaxLive)
	}
	seen := map[string]bool{}
	for i, g := range c.Groups {
		if !groupName.MatchString(g.Name) || g.Name == "basic" || seen[g.Name] {
			return fmt.Errorf("session: tool group %d: name %q must be unique, not basic, and match %s", i, g.Name, groupName)
		}
		seen[g.Name] = true
	}
	return nil
}

var groupName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// Manager creates sessions and finds them again, in memory or, after a restart or an
// eviction, in the store.
type Manager struct {
	cfg      Config
	store    Store
	managers []*toolmgr.Manager
	res      Resources // nil: tools hold nothing for sessions outside their calls
	closers  []Closer  // told of every session deleted

	mu       sync.Mutex
	live     map[string]*Session
	loading  map[string]int           // sessions Get is loading from the store, how many times
	deleting map[string]chan struct{} // sessions retention is deleting; closed when done
	// retention deletes unused sessions (retention.go); nil: never.
	retention *retention
	skills    *skills.Manager
	protocol  *toolmgr.Manager
	pending   PendingSources // nil: no source is ever pending
	// groupTools answers for each of cfg.Groups' Tools patterns, as path.Match: the
	// tools a session lists are checked against every group.
	groupTools []globset.Set

	// The sweeper (evict.go); kick asks it to sweep now (MaxLive passed).
	sweepMu sync.Mutex
	stop    context.CancelFunc
	done    chan struct{}
	kick    chan struct{}

	idxMu      sync.Mutex
	idx        *rank.Index
	idxVersion uint64

	// Sharing sessions with other replicas (shared.go); nil: one process.
	notifier    store.Notifier
	replica     string
	readThrough bool // ReadThrough: live sessions are checked against the store on every use
	// Results of other replicas' background calls (background.go); nil calls: none.
	calls   CallReader
	shape   func(*tool.Result) *tool.Result
	readers sync.WaitGroup // reads of their records under way
}

// UseSkills gives sessions their view (available_skills) of the skill registry.
func (m *Manager) UseSkills(s *skills.Manager) { m.skills = s }

// UsePendingSources lets whitelists keep the tools of sources declared but not
// connected yet (MCP servers starting), which are not in any registry until then.
func (m *Manager) UsePendingSources(f PendingSources) { m.pending = f }

// Specs returns every registered tool's spec (built-ins, OpenAPI and provider tools,
// and the tools of the MCP servers connected now), sorted by name; on a name clash
// the higher-priority registry's tool is the one listed, as in a session.
func (m *Manager) Specs() []tool.Spec {
	p, _ := NewToolProxy(m.managers, nil)
	return p.Specs()
}

// NewManager returns a session registry over the given tool managers (in priority order).
func NewManager(cfg Config, st Store, managers ...*toolmgr.Manager) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	groupTools := make([]globset.Set, len(cfg.Groups))
	for i, g := range cfg.Groups {
		groupTools[i] = globset.New(g.Tools)
	}
	return &Manager{cfg: cfg, store: st, managers: managers, live: map[string]*Session{}, protocol: protocolTools(cfg.Groups),
		groupTools: groupTools, kick: make(chan struct{}, 1), loading: map[string]int{}, deleting: map[string]chan struct{}{}}, nil
}

// MaxWhitelist bounds a session's available_tools and available_skills: every entry is
// matched against every tool when the session is made and on each call, and 100,000
// patterns (a 1 MB body) held a request for half a minute of CPU.
const MaxWhitelist = 4096

// MaxWhitelistEntry bounds the length of one entry, in bytes: a tool or skill name is
// at most 64 characters for every provider, and 4096 patterns of 900 bytes each with
// several globs still took 2 s to create a session and 0.8 s for each call on it.
const MaxWhitelistEntry = 256

// Create validates spec, persists a new session and returns it with warnings about
// whitelist entries that were dropped.
func (m *Manager) Create(ctx context.Context, tenant string, spec Spec) (*Session, []string, error) {
	if spec.PermissionMode == "" {
		spec.PermissionMode = "default"
	}
	if !permissionModes[spec.PermissionMode] {
		return nil, nil, fmt.Errorf("%w: permission_mode %q is not one of default, accept_edits, explore, bypass, dont_ask", ErrInvalid, spec.PermissionMode)
	}
	for field, list := range map[string][]string{"available_tools": spec.AvailableTools, "available_skills": spec.AvailableSkills} {
		if len(list) > MaxWhitelist {
			return nil, nil, fmt.Errorf("%w: %s has %d entries; at most %d (use patterns such as mcp__github__*)", ErrInvalid, field, len(list), MaxWhitelist)
		}
		for i, e := range list {
			if len(e) > MaxWhitelistEntry {
				return nil, nil, fmt.Errorf("%w: %s[%d] is %d bytes long; an entry (a name or a pattern such as mcp__github__*) is at most %d", ErrInvalid, field, i, len(e), MaxWhitelistEntry)
			}
		}
	}
	id := NewID("ses_")
	sess, warnings, err := m.build(id, tenant, spec, time.Now().UTC())
	if err != nil {
		return nil, nil, err
	}
	if spec.Workdir != "" {
		// The data dir holds the keys and the database; in it, another session's
		// workspace or artifacts, maybe another tenant's, which retention removes with
		// that session, from under this one.
		if dir, ok := m.inDaemonDirs(sess.Info.Workdir); ok {
			return nil, nil, fmt.Errorf("%w: workdir %s is inside the daemon's directory %s, which holds its keys, its database and each session's own files; name one outside it", ErrInvalid, spec.Workdir, dir)
		}
	}
	raw, err := json.Marshal(sess.Spec)
	if err != nil {
		return nil, nil, err
	}
	rec := &store.Session{ID: id, Tenant: tenant, Spec: raw, CreatedAt: sess.CreatedAt, UpdatedAt: sess.CreatedAt}
	if err := m.store.CreateSession(ctx, rec); err != nil {
		return nil, nil, fmt.Errorf("session: persist: %w", err)
	}
	sess.applied = raw // not live yet: no lock needed
	sess.storedUsed = rec.UpdatedAt
	m.admit(sess)
	return sess, warnings, nil
}

// Get returns a session by id, loading it from the store when this process does not
// hold it (after a restart or an eviction, or when another replica created it). A
// session of another tenant is not found. A session being deleted (retention) is
// waited for: then it is not found, or, kept after all, loaded.
func (m *Manager) Get(ctx context.Context, tenant, id string) (*Session, error) {
	sess, ok, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if ok {
		if sess.Tenant != tenant {
			return nil, ErrNotFound
		}
		if err := m.touchStored(ctx, sess); err != nil {
			return nil, err
		}
		switch {
		case m.readThrough:
			// As above: served as this process has it when the store cannot say.
			err = m.syncStored(ctx, sess)
		case sess.stale.Load():
			// Served as this process has it when the store cannot say (the next use
			// tries again); calls need the store anyway.
			err = m.refresh(ctx, sess)
		}
		if errors.Is(err, store.ErrNotFound) {
			_ = m.forget(ctx, sess) // it says: another replica deleted it
			return nil, ErrNotFound
		}
		return sess, nil
	}
	// lookup counted this load: retention does not delete the session meanwhile.
	defer m.loaded(id)
	rec, err := m.store.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("session: load %s: %w", id, err)
	}
	if rec.Tenant != tenant {
		return nil, ErrNotFound
	}
	used, err := m.touchLoaded(ctx, rec)
	if err != nil {
		return nil, err
	}
	var stored storedSpec
	if err := json.Unmarshal(rec.Spec, &stored); err != nil {
		return nil, fmt.Errorf("session: stored spec of %s: %w", id, err)
	}
	sess, _, err = m.build(id, rec.Tenant, stored.Spec, rec.CreatedAt)
	if err != nil {
		return nil, err
	}
	sess.Info.Loaded = true
	sess.restore(stored.Resume)
	sess.applied = rec.Spec // not live yet: no lock needed
	sess.storedUsed = used
	return m.admit(sess), nil
}

// lookup returns the live session id (ok), touched, or, when there is none, counts a
// load of it (the caller calls loaded when done). It waits while retention deletes
// the session.
func (m *Manager) lookup(ctx context.Context, tenant, id string) (*Session, bool, error) {
	for {
		m.mu.Lock()
		sess, ok := m.live[id]
		if ok && sess.Tenant == tenant {
			// Under m.mu, as evict checks it: a sweep either took the session out of
			// live before this (and it is loaded again) or sees it used now.
			sess.touch()
		}
		deleting := m.deleting[id]
		if !ok && deleting == nil {
			m.loading[id]++
		}
		m.mu.Unlock()
		if ok || deleting == nil {
			return sess, ok, nil
		}
		select {
		case <-deleting:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// loaded ends a load counted by lookup.
func (m *Manager) loaded(id string) {
	m.mu.Lock()
	if m.loading[id]--; m.loading[id] <= 0 {
		delete(m.loading, id)
	}
	m.mu.Unlock()
}

// admit makes sess live and returns the live session of its id: sess, or the one
// another request loaded meanwhile.
func (m *Manager) admit(sess *Session) *Session {
	sess.touch() // before it is live: the sweeper must not find it unused since ever
	m.mu.Lock()
	existing, loaded := m.live[sess.ID]
	if loaded {
		sess = existing
		sess.touch() // under m.mu, as in Get
	} else {
		m.live[sess.ID] = sess
	}
	over := m.cfg.MaxLive > 0 && len(m.live) > m.cfg.MaxLive
	m.mu.Unlock()
	if over {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
	return sess
}

func (m *Manager) build(id, tenant string, spec Spec, created time.Time) (*Session, []string, error) {
	workdir, err := m.workdir(id, spec.Workdir)
	if err != nil {
		return nil, nil, err
	}
	rules, err := spec.Rules.parse()
	if err != nil {
		return nil, nil, err
	}
	proxy, warnings := newToolProxy(m.managers, spec.AvailableTools, m.pending, m.protocol)
	for _, g := range spec.ActiveGroups {
		if !m.hasGroup(g) {
			return nil, nil, fmt.Errorf("%w: active_groups: unknown group %q; the tool groups are %s", ErrInvalid, g, m.groupNames())
		}
	}
	if spec.AvailableTools != nil {
		// Persist what was accepted, so a reload does not warn again.
		kept := make([]string, 0, len(spec.AvailableTools))
		patterns := make(map[string]bool, len(proxy.patterns))
		for _, pat := range proxy.patterns {
			patterns[pat] = true
		}
		for _, n := range spec.AvailableTools {
			n = strings.TrimSpace(n)
			if proxy.exact[n] || patterns[n] {
				kept = append(kept, n)
			}
		}
		spec.AvailableTools = dedupe(kept)
	}
	info := &tool.Session{ID: id, Tenant: tenant, Workdir: workdir, Metadata: spec.Metadata, State: tool.NewState(), Tools: proxy}
	var sp *skills.Proxy
	if m.skills != nil {
		var sw []string
		sp, sw = skills.NewProxy(m.skills, spec.AvailableSkills)
		warnings = append(warnings, sw...)
		info.State.LoadOrStore(skills.SessionStateKey, func() any { return sp })
	} else if len(spec.AvailableSkills) > 0 {
		warnings = append(warnings, "no skills are configured (skills.dirs); available_skills is ignored")
	}
	sess := &Session{
		ID:        id,
		Tenant:    tenant,
		Spec:      spec,
		CreatedAt: created,
		Tools:     proxy,
		rules:     rules,
		Skills:    sp,
		Info:      info,
		serial:    make(chan struct{}, 1),
		manager:   m,
		groups:    map[string]bool{},
	}
	for _, g := range spec.ActiveGroups {
		sess.groups[g] = true
	}
	if len(m.cfg.Groups) > 0 {
		proxy.gate = sess.groupAllows
		if sp != nil {
			sp.SetGate(sess.skillGroupAllows)
		}
		warnings = append(warnings, sess.switchedOffWarnings(spec.AvailableTools)...)
	}
	info.State.LoadOrStore(sessionKey, func() any { return sess })
	return sess, warnings, nil
}

// groupNames lists the configured tool groups for an error message.
func (m *Manager) groupNames() string {
	if len(m.cfg.Groups) == 0 {
		return "none (tool_groups is not configured)"
	}
	names := make([]string, len(m.cfg.Groups))
	for i, g := range m.cfg.Groups {
		names[i] = g.Name
	}
	return strings.Join(names, ", ")
}

// switchedOffWarnings names the whitelist entries whose tools all lie in groups
// that are off, which the session's tools then leave out: without a word, a backend
// that asked for them could not tell why they are missing. The exact names that the
// same groups hold share one line (a backend that whitelists 400 tools by name got a
// line for each of a group's tools), naming at most switchedOffNamed of them; a
// pattern has a line of its own.
func (s *Session) switchedOffWarnings(whitelist []string) []string {
	byName := map[string][]tool.Spec{}
	for _, m := range s.Tools.managers {
		for _, sp := range m.SortedSpecs() {
			byName[sp.Name] = append(byName[sp.Name], sp)
		}
	}
	type line struct {
		groups  []string // quoted
		pattern string
		names   []string
	}
	var lines []*line
	byGroups := map[string]*line{}
	seen := map[string]bool{}
	for _, entry := range whitelist {
		if entry = strings.TrimSpace(entry); entry == "" || seen[entry] {
			continue
		}
		seen[entry] = true
		// An exact name is looked up, not matched against every tool: with 2,000
		// names that was 4 million path.Match calls, 0.7 s a session.
		matched := byName[entry]
		if isPattern(entry) {
			// A prefix pattern is looked up too (globset.Matching): 2,000 of them cost
			// 0.4 s a session matched against every tool.
			matched = nil
			took := map[string]bool{} // byName holds every manager's tool of a name
			for _, m := range s.Tools.managers {
				for _, n := range globset.Matching(m.SortedNames(), entry) {
					if !took[n] {
						took[n] = true
						matched = append(matched, byName[n]...)
					}
				}
			}
		}
		if len(matched) == 0 || slices.ContainsFunc(matched, s.groupAllows) {
			continue
		}
		var off []string
		for _, g := range s.manager.cfg.Groups {
			if slices.ContainsFunc(matched, g.contains) {
				off = append(off, strconv.Quote(g.Name))
			}
		}
		if isPattern(entry) {
			lines = append(lines, &line{groups: off, pattern: entry})
			continue
		}
		key := strings.Join(off, ", ")
		if l, ok := byGroups[key]; ok {
			l.names = append(l.names, entry)
			continue
		}
		l := &line{groups: off, names: []string{entry}}
		byGroups[key] = l
		lines = append(lines, l)
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		var what string
		switch {
		case l.pattern != "":
			what = "tools matching " + l.pattern + " are"
		case len(l.names) == 1:
			what = "tool " + l.names[0] + " is"
		case len(l.names) > switchedOffNamed:
			what = fmt.Sprintf("%d tools (%s, …) are", len(l.names), strings.Join(l.names[:switchedOffNamed], ", "))
		default:
			what = "tools " + strings.Join(l.names, ", ") + " are"
		}
		group, which, it := "tool group "+l.groups[0], "which is", "it"
		if len(l.groups) > 1 {
			group, which, it = "tool groups "+strings.Join(l.groups, ", "), "which are", "them"
		}
		out = append(out, fmt.Sprintf("%s in %s, %s off in this session: name %s in active_groups, or the model switches %s on with %s",
			what, group, which, it, it, ResetToolName))
	}
	return out
}

// switchedOffNamed is how many names a warning of tools in switched-off groups shows.
const switchedOffNamed = 3

func (m *Manager) hasGroup(name string) bool {
	for _, g := range m.cfg.Groups {
		if g.Name == name {
			return true
		}
	}
	return false
}

// groupAllows reports whether a tool is in no group, or in an active one.
func (s *Session) groupAllows(spec tool.Spec) bool {
	m := s.manager
	s.mu.Lock()
	defer s.mu.Unlock()
	inSome := false
	for i := range m.cfg.Groups {
		g := &m.cfg.Groups[i]
		// g.contains(spec), with the patterns matched by m.groupTools[i].
		if m.groupTools[i].Match(spec.Name) || g.holdsSource(spec) {
			if s.groups[g.Name] {
				return true
			}
			inSome = true
		}
	}
	return !inSome
}

// setGroups makes active the final set of groups, persists it, and returns the
// groups that were switched on.
func (m *Manager) setGroups(ctx context.Context, sess *Session, active []string) ([]Group, error) {
	sess.mu.Lock()
	stored, err := m.rewrite(ctx, sess.ID, time.Now(), func(st *storedSpec) bool {
		st.Spec.ActiveGroups = active
		return true
	})
	if err != nil {
		sess.mu.Unlock()
		return nil, m.persistFailed(ctx, sess, "active groups", err)
	}
	defer sess.mu.Unlock()
	spec := sess.Spec
	spec.ActiveGroups = active
	sess.resumeStored = stored.Resume != nil
	m.changed(ctx, sess.ID)
	var newly []Group
	next := map[string]bool{}
	for _, g := range m.cfg.Groups {
		if slices.Contains(active, g.Name) {
			next[g.Name] = true
			if !sess.groups[g.Name] {
				newly = append(newly, g)
			}
		}
	}
	sess.Spec, sess.groups = spec, next
	return newly, nil
}

// persistFailed is the error of a change to sess's stored spec that failed (sess.mu
// not held): ErrNotFound when the store no longer has the session (another replica's
// retention deleted it), which this process then forgets as Get would.
func (m *Manager) persistFailed(ctx context.Context, sess *Session, what string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		_ = m.forget(ctx, sess)
		return ErrNotFound
	}
	return fmt.Errorf("session: persist %s: %w", what, err)
}

// workdir resolves the session's working directory: a fresh directory under the
// workspace dir, or the one asked for if it lies within an allowed root.
func (m *Manager) workdir(id, asked string) (string, error) {
	if asked == "" {
		dir := filepath.Join(m.cfg.WorkspaceDir, id)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return "", fmt.Errorf("session: create workspace: %w", err)
		}
		return dir, nil
	}
	if strings.ContainsRune(asked, 0) || !filepath.IsAbs(asked) {
		return "", fmt.Errorf("%w: workdir must be an absolute path", ErrInvalid)
	}
	// The roots are checked before anything else about the path is told: a path
	// that is (or, through a link, leads) outside every root gets one answer whether
	// it exists, is a file or cannot be read, so creating sessions cannot probe the
	// host's paths.
	outside := fmt.Errorf("%w: workdir %s is not under an allowed root (config sessions.workdir_roots)", ErrInvalid, asked)
	roots := m.resolvedRoots()
	clean := filepath.Clean(asked)
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		if !underAny(roots, failedAt(clean, err)) {
			return "", outside
		}
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: workdir %s does not exist", ErrInvalid, asked)
		}
		return "", fmt.Errorf("%w: workdir %s: %v", ErrInvalid, asked, err)
	}
	if !underAny(roots, real) {
		return "", outside
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: workdir %s is not a directory", ErrInvalid, asked)
	}
	return real, nil
}

// resolvedRoots returns the workdir roots with their links resolved; a root that
// cannot be resolved (not there) holds nothing.
func (m *Manager) resolvedRoots() []string {
	var out []string
	for _, root := range m.cfg.WorkdirRoots {
		if rr, err := filepath.EvalSymlinks(root); err == nil {
			out = append(out, rr)
		}
	}
	return out
}

// underAny reports whether path (absolute, clean) is one of roots or inside one.
func underAny(roots []string, path string) bool {
	for _, r := range roots {
		if rel, err := filepath.Rel(r, path); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return true
		}
	}
	return false
}

// failedAt returns where on disk resolving path stopped with err: the path
// EvalSymlinks had reached (links before it resolved) when the error names one,
// else the deepest ancestor of path that resolves, so a link out of a root to a
// missing or unreadable place is judged by where it leads.
func failedAt(path string, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && filepath.IsAbs(pe.Path) {
		return filepath.Clean(pe.Path)
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return real
		}
		if dir == filepath.Dir(dir) {
			return dir
		}
	}
}

// inDaemonDirs reports whether dir (resolved) is the data dir, the workspace dir or
// the artifact dir, or inside one, and which: they hold the daemon's own files and
// the directories it makes for sessions, and removes with them (retention).
func (m *Manager) inDaemonDirs(dir string) (string, bool) {
	for _, d := range []string{m.cfg.DataDir, m.cfg.WorkspaceDir, m.cfg.ArtifactDir} {
		if d == "" {
			continue
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			real = filepath.Clean(d)
		}
		if rel, err := filepath.Rel(real, dir); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return d, true
		}
	}
	return "", false
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns prefix followed by 128 random bits.
func NewID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return formatID(prefix, &b)
}

// formatID is prefix followed by b in base32, built on the stack: one allocation,
// the string's.
func formatID(prefix string, b *[16]byte) string {
	var buf [48]byte
	return string(idEncoding.AppendEncode(append(buf[:0], prefix...), b[:]))
}

// NewTimeID returns prefix followed by 128 bits: the time in milliseconds (48 bits,
// big-endian) then 80 random bits, in NewID's format. Ids made close in time share
// their leading characters, so a store's index on them is appended to in a few pages
// instead of one random page per insert (call records: one index page written per
// commit instead of one per call). 80 random bits keep them unguessable and unique.
func NewTimeID(prefix string) string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (8 * (5 - i)))
	}
	_, _ = rand.Read(b[6:])
	return formatID(prefix, &b)
}

// TimeOfID returns the time NewTimeID(prefix) put in id, or false when id is not
// such an id.
func TimeOfID(prefix, id string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return time.Time{}, false
	}
	b, err := idEncoding.DecodeString(rest)
	if err != nil || len(b) != 16 {
		return time.Time{}, false
	}
	var ms int64
	for _, c := range b[:6] {
		ms = ms<<8 | int64(c)
	}
	return time.UnixMilli(ms), true
}

// AddRules is the change to a session's stored spec that adds allow rules to it,
// for the store to make in the transaction that decides an approval "for session"
// or "with rule" (store.ApprovalDecision.SessionSpec): the session then has the
// rules exactly when the approval is decided. Follow a decision that made it with
// SpecChanged.
func AddRules(rules []string) (func(json.RawMessage) (json.RawMessage, error), error) {
	if _, err := approval.ParseRules(approval.Allow, rules); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return func(raw json.RawMessage) (json.RawMessage, error) {
		var st storedSpec
		if err := json.Unmarshal(raw, &st); err != nil {
			return nil, fmt.Errorf("stored spec: %w", err)
		}
		st.addAllow(rules)
		return json.Marshal(st)
	}, nil
}

// addAllow adds allow rules to the stored spec's, each once (two approvals "for
// session" with the same suggestion add it once).
func (st *storedSpec) addAllow(rules []string) {
	rs := RuleSet{}
	if st.Spec.Rules != nil {
		rs = *st.Spec.Rules
	}
	rs.Allow = append([]string(nil), rs.Allow...)
	for _, r := range rules {
		if !slices.Contains(rs.Allow, r) {
			rs.Allow = append(rs.Allow, r)
		}
	}
	st.Spec.Rules = &rs
}

// SpecChanged makes this replica's live copy of session id, if it holds one, hold
// the session's stored spec, which something other than the manager changed (an
// approval's rules, AddRules), and tells the other replicas.
func (m *Manager) SpecChanged(ctx context.Context, id string) error {
	m.mu.Lock()
	s := m.live[id]
	m.mu.Unlock()
	m.changed(ctx, id)
	if s == nil {
		return nil
	}
	if err := m.refresh(ctx, s); err != nil {
		s.stale.Store(true) // read again at its next use
		return err
	}
	return nil
}

// AllowRules adds allow rules to a session (an approval "for session" or "with rule")
// and persists them, so they hold after a restart and on other replicas that load
// the session afterwards.
func (m *Manager) AllowRules(ctx context.Context, tenant, id string, rules []string) error {
	sess, err := m.Get(ctx, tenant, id)
	if err != nil {
		return err
	}
	if _, err := approval.ParseRules(approval.Allow, rules); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	sess.mu.Lock()
	// Added to the stored rules, not to this process's copy: rules another replica
	// wrote meanwhile are kept.
	stored, err := m.rewrite(ctx, id, time.Now(), func(st *storedSpec) bool {
		st.addAllow(rules)
		return true
	})
	if err != nil {
		sess.mu.Unlock()
		return m.persistFailed(ctx, sess, "rules", err)
	}
	defer sess.mu.Unlock()
	all, err := stored.Spec.Rules.parse()
	if err != nil {
		return err
	}
	sess.Spec.Rules, sess.rules = stored.Spec.Rules, all
	sess.resumeStored = stored.Resume != nil
	m.changed(ctx, id)
	return nil
}
