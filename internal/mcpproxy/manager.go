package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// ServerStore keeps the servers added at run time, so that they come back after a
// restart of the daemon. *store.SQLite and *store.Postgres implement it.
type ServerStore interface {
	PutMCPServer(ctx context.Context, name string, cfg json.RawMessage) error
	CreateMCPServer(ctx context.Context, name string, cfg json.RawMessage) error
	DeleteMCPServer(ctx context.Context, name string) error
	ListMCPServers(ctx context.Context) ([]store.MCPServerRecord, error)
}

// Errors of the run-time API.
var (
	ErrServerExists  = errors.New("mcp server already exists")
	ErrUnknownServer = errors.New("unknown mcp server")
	ErrNotRunning    = errors.New("mcp proxy is not running")
	// ErrServerDisabled: a disabled server is never connected, so there is nothing
	// to restart. Only its configuration enables it.
	ErrServerDisabled = errors.New("mcp server is disabled")
	// ErrNamespaceTaken: the new server's tool names would overlap those of a
	// server there is (see namespaceClash).
	ErrNamespaceTaken = errors.New("mcp server name space taken")
)

// storeTimeout bounds store calls made without a caller's context.
const storeTimeout = 10 * time.Second

// Option configures a Manager.
type Option func(*Manager)

// WithStore persists Add and Remove in st and loads its servers at Start.
func WithStore(st ServerStore) Option { return func(m *Manager) { m.store = st } }

// Manager runs the upstream MCP servers and keeps their tools registered in one
// toolmgr.Manager. It is safe for concurrent use.
type Manager struct {
	cfg      Config
	tools    *toolmgr.Manager
	reserved func(string) bool
	log      *slog.Logger
	metrics  *metrics
	store    ServerStore
	progress *progressRouter

	opMu    sync.Mutex // serializes Start, Stop, Add, Remove
	mu      sync.Mutex // guards the fields below
	servers map[string]*server
	started bool
	stopped bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	regMu      sync.Mutex // serializes registry updates
	registered map[string]*proxyTool

	// skipped holds the stored servers not run, with why, so that a reason is
	// logged once rather than at every Sync, and Status lists them (DELETE
	// removes them). Written under opMu; skipMu guards it (a leaf lock).
	skipMu  sync.Mutex
	skipped map[string]skippedServer
	// notifier, when Follow set it, tells the other replicas of Add and Remove.
	notifier   store.Notifier
	self       string
	stopFollow context.CancelFunc
	followDone chan struct{}
}

// New builds a Manager; nothing connects before Start. tools is the registry the MCP
// tools go into (the daemon gives the proxy one of its own); reserved reports names
// other tool sources hold (for prefix modes on_collision and never; nil for none);
// reg receives the metrics (nil for none).
func New(cfg Config, tools *toolmgr.Manager, reserved func(name string) bool, log *slog.Logger, reg prometheus.Registerer, opts ...Option) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if tools == nil {
		return nil, errors.New("mcpproxy: nil tool manager")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	met, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: metrics: %w", err)
	}
	m := &Manager{
		cfg: cfg.withDefaults(), tools: tools, reserved: reserved, log: log, metrics: met,
		progress: newProgressRouter(), servers: map[string]*server{}, registered: map[string]*proxyTool{},
	}
	for _, o := range opts {
		o(m)
	}
	for _, sc := range m.cfg.Servers {
		m.servers[sc.Name] = newServer(m, sc, false)
		met.up(sc.Name, false)
	}
	return m, nil
}

// Start loads the persisted servers and starts every enabled server's supervisor. It
// returns at once: each server connects on its own goroutine, so a slow or broken
// one delays neither Start nor the others. Cancelling ctx stops the servers as Stop
// does, but only Stop waits for them.
func (m *Manager) Start(ctx context.Context) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	if m.started || m.stopped {
		m.mu.Unlock()
		return errors.New("mcpproxy: Start called twice or after Stop")
	}
	m.mu.Unlock()
	persisted, err := m.readStore(ctx)
	if err != nil {
		m.log.Error("mcp proxy: could not load the servers added at run time", "err", err)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.addStoredLocked(persisted, nil)
	m.ctx, m.cancel = context.WithCancel(ctx)
	m.started = true
	for _, s := range m.servers {
		if s.cfg.Enabled {
			s.start(m.ctx)
		}
	}
	m.log.Info("mcp proxy started", "servers", len(m.servers), "prefix_mode", m.cfg.PrefixMode)
	return nil
}

// readStore reads the servers added at run time; one that does not parse or is
// invalid is skipped (and logged once). opMu is held.
func (m *Manager) readStore(ctx context.Context) ([]*server, error) {
	if m.store == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	recs, err := m.store.ListMCPServers(ctx)
	if err != nil {
		return nil, err
	}
	inStore := make(map[string]bool, len(recs))
	for _, r := range recs {
		inStore[r.Name] = true
	}
	m.skipMu.Lock()
	for name := range m.skipped {
		if !inStore[name] {
			delete(m.skipped, name) // logged again if it comes back so
		}
	}
	m.skipMu.Unlock()
	var out []*server
	for _, r := range recs {
		var sc ServerConfig
		if err := json.Unmarshal(r.Config, &sc); err != nil {
			m.skip(r.Name, nil, "stored server config does not parse; skipped: "+err.Error(), slog.LevelError)
			continue
		}
		sc.Name = r.Name
		if err := sc.Validate(); err != nil {
			m.skip(r.Name, &sc, "stored server config is invalid; skipped: "+newRedactor(&sc).text(err.Error()), slog.LevelError)
			continue
		}
		out = append(out, newServer(m, sc, true))
	}
	return out, nil
}

// skippedServer is a stored server not run, as Status shows it.
type skippedServer struct {
	transport, why string
	trust          bool
	since          time.Time
}

// skip logs why the stored server name is not run, unless that was logged last.
// sc is its configuration as stored, nil when that does not parse. opMu is held.
func (m *Manager) skip(name string, sc *ServerConfig, why string, level slog.Level) {
	m.skipMu.Lock()
	defer m.skipMu.Unlock()
	if m.skipped == nil {
		m.skipped = map[string]skippedServer{}
	}
	if old, ok := m.skipped[name]; ok && old.why == why {
		return
	}
	m.log.Log(context.Background(), level, "mcp proxy: "+why, "mcp_server", name)
	sk := skippedServer{why: why, trust: true, since: time.Now()}
	if sc != nil {
		sk.transport, sk.trust = sc.Transport, sc.trustsAnnotations()
	}
	m.skipped[name] = sk
}

// addStoredLocked adds and starts (once started) the stored servers not there yet,
// in name order, and returns how many it added. A configured server of the same name
// wins, and a server whose tool names would overlap those of one there is waits
// until that one is gone: both stay skipped. have, when set, are the names this
// replica ran from the store before. opMu and mu are held.
func (m *Manager) addStoredLocked(list []*server, have map[string]bool) int {
	sort.Slice(list, func(i, j int) bool { return list[i].cfg.Name < list[j].cfg.Name })
	added := 0
	for _, s := range list {
		name := s.cfg.Name
		if o, dup := m.servers[name]; dup {
			if !o.persisted {
				m.skip(name, &s.cfg, "mcp server in the store has the name of a configured one; the configured one wins", slog.LevelWarn)
			}
			continue
		}
		// Added before names were checked for overlaps: the configured servers,
		// then the stored ones in name order, keep their name space.
		if clash := m.clashLocked(&s.cfg); clash != "" {
			m.skip(name, &s.cfg, "mcp server in the store is not started: "+clash+"; remove it (DELETE /v1/mcp/servers/"+name+")", slog.LevelError)
			continue
		}
		m.skipMu.Lock()
		delete(m.skipped, name)
		m.skipMu.Unlock()
		m.servers[name] = s
		m.metrics.up(name, false)
		if m.started && s.cfg.Enabled {
			s.start(m.ctx)
		}
		if have != nil {
			m.log.Info("mcp server added on another replica", "mcp_server", name, "transport", s.cfg.Transport, "replaced", have[name])
		}
		added++
	}
	return added
}

// Sync brings the servers added at run time in line with the store, which replicas
// share: a server another replica added is added and connected here, one it removed
// is removed, one whose stored configuration changed is replaced. Servers from the
// configuration are left alone. It returns how many servers it added or removed.
func (m *Manager) Sync(ctx context.Context) (int, error) {
	if m.store == nil {
		return 0, nil
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	running := m.started && !m.stopped
	m.mu.Unlock()
	if !running {
		return 0, ErrNotRunning
	}
	list, err := m.readStore(ctx)
	if err != nil {
		return 0, err
	}
	want := make(map[string]*server, len(list))
	for _, s := range list {
		want[s.cfg.Name] = s
	}
	var gone []*server
	have := map[string]bool{}
	m.mu.Lock()
	for name, s := range m.servers {
		if !s.persisted {
			continue
		}
		have[name] = true
		if w, ok := want[name]; ok && w.stored == s.stored {
			continue
		}
		delete(m.servers, name)
		gone = append(gone, s)
	}
	m.mu.Unlock()
	for _, s := range gone {
		s.stop()
		m.metrics.forget(s.cfg.Name)
	}
	if len(gone) > 0 {
		m.syncRegistry()
	}
	for _, s := range gone {
		if _, replaced := want[s.cfg.Name]; !replaced {
			m.log.Info("mcp server removed on another replica", "mcp_server", s.cfg.Name)
		}
	}
	m.mu.Lock()
	added := m.addStoredLocked(list, have)
	m.mu.Unlock()
	return len(gone) + added, nil
}

// SyncInterval is how often Follow reads the store when no notification came: the
// bound on how long a lost notification delays a change.
const SyncInterval = 5 * time.Second

// Follow keeps this replica's servers added at run time in line with the store the
// replicas share (see Sync): at once when n tells of a change another replica made,
// and every interval (<= 0: SyncInterval) in case a notification was lost. Add and
// Remove tell the others through n; so does Restart, which restarts the server on
// every replica. self is this replica's id. Call it once, after Start; Stop ends it.
func (m *Manager) Follow(n store.Notifier, self string, interval time.Duration) {
	if interval <= 0 {
		interval = SyncInterval
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started || m.stopped || m.stopFollow != nil || m.store == nil {
		return
	}
	ch, unsubscribe := n.Subscribe(store.TopicMCPServers)
	m.notifier, m.self = n, self
	ctx, cancel := context.WithCancel(m.ctx)
	m.stopFollow, m.followDone = cancel, make(chan struct{})
	go func() {
		defer close(m.followDone)
		defer unsubscribe()
		t := time.NewTicker(interval)
		defer t.Stop()
		var out storeOutage
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case p, open := <-ch:
				if !open { // the ticker goes on
					ch = nil
					continue
				}
				if origin, name, ok := parseRestart(p); ok {
					if origin != self {
						if err := m.restartHere(name); err == nil {
							m.log.Info("mcp server restarted on another replica", "mcp_server", name, "replica_id", origin)
						}
					}
					continue
				}
			}
			_, err := m.Sync(ctx)
			if ctx.Err() == nil && !errors.Is(err, ErrNotRunning) {
				out.note(m.log, err, time.Now())
			}
		}
	}()
}

// storeOutage keeps Follow's log of a store it cannot read to a line when the
// outage begins, one a minute while it lasts (it is retried every SyncInterval:
// a PostgreSQL outage logged an ERROR every 5 s) and one when it ends.
type storeOutage struct {
	since, logged time.Time
	attempts      int
}

// storeOutageRepeat is how often a lasting outage is logged again.
const storeOutageRepeat = time.Minute

func (o *storeOutage) note(log *slog.Logger, err error, now time.Time) {
	switch {
	case err == nil:
		if !o.since.IsZero() {
			log.Info("mcp proxy: reading the servers added at run time works again",
				"down_for", now.Sub(o.since).Round(time.Millisecond).String(), "attempts", o.attempts)
		}
		*o = storeOutage{}
	case o.since.IsZero():
		*o = storeOutage{since: now, logged: now, attempts: 1}
		log.Error("mcp proxy: reading the servers added at run time failed; retried", "err", err)
	default:
		o.attempts++
		if now.Sub(o.logged) >= storeOutageRepeat {
			o.logged = now
			log.Error("mcp proxy: reading the servers added at run time still fails; retried", "err", err,
				"down_for", now.Sub(o.since).Round(time.Second).String(), "attempts", o.attempts)
		}
	}
}

// announce tells the other replicas (through Follow's notifier) that the servers
// changed, or, with restart, that name is to be restarted.
func (m *Manager) announce(name string, restart bool) {
	m.mu.Lock()
	n, self := m.notifier, m.self
	m.mu.Unlock()
	if n == nil {
		return
	}
	payload := name
	if restart {
		payload = "restart " + self + " " + name
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := n.Notify(ctx, store.TopicMCPServers, payload); err != nil {
		m.log.Warn("mcp proxy: could not tell the other replicas; they learn of it within "+SyncInterval.String(), "mcp_server", name, "err", err)
	}
}

// parseRestart reads a restart payload of announce.
func parseRestart(p string) (origin, name string, ok bool) {
	rest, ok := strings.CutPrefix(p, "restart ")
	i := strings.LastIndexByte(rest, ' ') // a server's name has no space; a replica id may
	if !ok || i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// Stop closes every connection (stdio children are killed if they do not exit when
// their stdin closes), waits for the supervisors and unregisters the tools.
func (m *Manager) Stop() {
	m.mu.Lock()
	stopFollow, followDone := m.stopFollow, m.followDone
	m.mu.Unlock()
	if stopFollow != nil { // before opMu: its Sync takes opMu
		stopFollow()
		<-followDone
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	if m.cancel != nil {
		m.cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()

	m.regMu.Lock()
	defer m.regMu.Unlock()
	names := make([]string, 0, len(m.registered))
	for n := range m.registered {
		names = append(names, n)
	}
	m.tools.Unregister(names...)
	m.registered = map[string]*proxyTool{}
}

// Add declares a server at run time: persisted first (when there is a store), then
// connected like the others. Before Start it only joins the list.
func (m *Manager) Add(ctx context.Context, sc ServerConfig) error {
	if err := sc.Validate(); err != nil {
		return err
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	_, dup := m.servers[sc.Name]
	clash := m.clashLocked(&sc)
	stopped := m.stopped
	m.mu.Unlock()
	switch {
	case stopped:
		return ErrNotRunning
	case dup:
		return fmt.Errorf("%w: %s", ErrServerExists, sc.Name)
	case clash != "":
		// Refused rather than renamed: a server there is keeps its tool names, and
		// a newcomer gets none in its name space.
		return fmt.Errorf("%w: %s", ErrNamespaceTaken, clash)
	}
	if m.store != nil {
		b, err := json.Marshal(sc)
		if err != nil {
			return err
		}
		// Not a replacement: the name may be stored by another replica that added it
		// a moment ago (its notification not here yet), or not run here (skipped).
		if err := m.store.CreateMCPServer(ctx, sc.Name, b); errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("%w: %s (in the store: added on another replica, or not run on this one)", ErrServerExists, sc.Name)
		} else if err != nil {
			return fmt.Errorf("mcpproxy: persist server %s: %w", sc.Name, err)
		}
	}
	s := newServer(m, sc, m.store != nil)
	m.mu.Lock()
	m.servers[sc.Name] = s
	m.metrics.up(sc.Name, false)
	if m.started && sc.Enabled {
		s.start(m.ctx)
	}
	m.mu.Unlock()
	m.log.Info("mcp server added", "mcp_server", sc.Name, "transport", sc.Transport)
	if s.persisted {
		m.announce(sc.Name, false)
	}
	return nil
}

// clashLocked says why sc cannot join the servers there are (see namespaceClash),
// or "". m.mu is held.
func (m *Manager) clashLocked(sc *ServerConfig) string {
	names := make([]string, 0, len(m.servers))
	for name := range m.servers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if o := m.servers[name]; name != sc.Name {
			if clash := namespaceClash(&o.cfg, sc); clash != "" {
				return clash
			}
		}
	}
	return ""
}

// Remove closes a server, unregisters its tools and deletes it from the store. A
// server from the configuration is removed until the daemon restarts. A server in
// the store that is not run here (skipped: its stored configuration is invalid, or
// its tool names overlap a server's there is; or added on another replica moments
// ago) is deleted from the store, and so from the replicas that run it.
func (m *Manager) Remove(name string) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	s := m.server(name)
	if s == nil {
		return m.removeStoredLocked(name)
	}
	if s.persisted && m.store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := m.store.DeleteMCPServer(ctx, name)
		cancel()
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("mcpproxy: delete server %s from the store: %w", name, err)
		}
	}
	m.mu.Lock()
	delete(m.servers, name)
	m.mu.Unlock()
	s.stop()
	m.syncRegistry()
	m.metrics.forget(name)
	m.log.Info("mcp server removed", "mcp_server", name)
	if s.persisted {
		m.announce(name, false)
	}
	return nil
}

// removeStoredLocked deletes from the store a server this replica does not run:
// one readStore or addStoredLocked skipped (whose log says to remove it), or one
// another replica added that Sync has not brought here yet. opMu is held.
func (m *Manager) removeStoredLocked(name string) error {
	if m.store == nil {
		return fmt.Errorf("%w: %s", ErrUnknownServer, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	err := m.store.DeleteMCPServer(ctx, name)
	cancel()
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %s", ErrUnknownServer, name)
	case err != nil:
		return fmt.Errorf("mcpproxy: delete server %s from the store: %w", name, err)
	}
	attrs := []any{"mcp_server", name}
	m.skipMu.Lock()
	if sk, ok := m.skipped[name]; ok {
		attrs = append(attrs, "skipped_for", sk.why)
	}
	delete(m.skipped, name)
	m.skipMu.Unlock()
	m.log.Info("mcp server removed from the store (it was not running here)", attrs...)
	m.announce(name, false)
	return nil
}

// countCall counts a call of s, unless s was removed: Remove drops its series
// (after taking it out of the list), and a call that was in flight then, or that
// found the tool before, must not bring them back.
func (m *Manager) countCall(s *server, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.servers[s.cfg.Name] == s {
		m.metrics.call(s.cfg.Name, outcome)
	}
}

// Restart drops a server's connection and connects again at once (no backoff), here
// and, once Follow runs, on the other replicas that follow the same store (best
// effort: a replica that misses the notification keeps its connection). It fails
// with ErrUnknownServer, ErrServerDisabled or ErrNotRunning.
func (m *Manager) Restart(name string) error {
	if err := m.restartHere(name); err != nil {
		return err
	}
	m.announce(name, true)
	return nil
}

// restartHere is Restart on this replica only.
func (m *Manager) restartHere(name string) error {
	s := m.server(name)
	if s == nil {
		return fmt.Errorf("%w: %s", ErrUnknownServer, name)
	}
	if !s.cfg.Enabled {
		return fmt.Errorf("%w: %s", ErrServerDisabled, name)
	}
	m.mu.Lock()
	running := m.started && !m.stopped
	m.mu.Unlock()
	if !running {
		return ErrNotRunning
	}
	signal(s.wake)
	return nil
}

func (m *Manager) server(name string) *server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.servers[name]
}

func (m *Manager) serverList() []*server {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*server, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].cfg.Name < out[j].cfg.Name })
	return out
}

// Status reports every server, by name, and the stored servers not run (state
// skipped, last_error saying why) but for one a configured server's name hides.
func (m *Manager) Status() []ServerStatus {
	list := m.serverList()
	out := make([]ServerStatus, len(list))
	running := make(map[string]bool, len(list))
	for i, s := range list {
		out[i] = s.status()
		running[s.cfg.Name] = true
	}
	m.skipMu.Lock()
	for name, sk := range m.skipped {
		if !running[name] {
			out = append(out, ServerStatus{Name: name, Transport: sk.transport, State: StateSkipped,
				LastError: sk.why, LastErrorAt: sk.since, Since: sk.since, Persisted: true, TrustAnnotations: sk.trust})
		}
	}
	m.skipMu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Summary counts servers by state, for /readyz and logs.
type Summary struct {
	Servers    int      `json:"servers"`
	Ready      int      `json:"ready"`
	Connecting int      `json:"connecting"`
	Failed     int      `json:"failed"`
	Disabled   int      `json:"disabled"`
	Down       []string `json:"down,omitempty"` // enabled servers not ready
	// Skipped are the servers in the store not run (see StateSkipped); not in Down.
	Skipped []string `json:"skipped,omitempty"`
	// Starting are the servers of Down making their first connection attempt since
	// they were declared: their tools are not registered yet.
	Starting []string `json:"starting,omitempty"`
}

// Summary counts servers by state.
func (m *Manager) Summary() Summary {
	var sum Summary
	for _, st := range m.Status() {
		sum.Servers++
		switch st.State {
		case StateReady:
			sum.Ready++
		case StateConnecting:
			sum.Connecting++
		case StateFailed:
			sum.Failed++
		case StateDisabled:
			sum.Disabled++
		case StateSkipped:
			sum.Skipped = append(sum.Skipped, st.Name)
			continue
		}
		if st.State != StateReady && st.State != StateDisabled {
			sum.Down = append(sum.Down, st.Name)
		}
		if st.State == StateConnecting && st.Restarts == 0 {
			sum.Starting = append(sum.Starting, st.Name)
		}
	}
	return sum
}

// Ready reports whether every enabled server is connected. The daemon should show
// it in /readyz rather than fail on it: one broken upstream server must not take the
// daemon out of service.
func (m *Manager) Ready() bool {
	return len(m.Summary().Down) == 0
}

// syncRegistry brings the registry in line with every server's last known tools:
// names assigned afresh (a pure function of servers and tools), tools whose name or
// spec changed replaced, the rest left alone.
func (m *Manager) syncRegistry() {
	m.regMu.Lock()
	defer m.regMu.Unlock()
	m.mu.Lock()
	stopped := m.stopped
	m.mu.Unlock()
	if stopped {
		return
	}
	list := m.serverList()
	byName := map[string]*server{}
	known := map[string]map[string]mcp.Tool{} // server → upstream name → tool
	unread := map[string][]string{}           // server → notes on entries not decoded
	var input []serverTools
	for _, s := range list {
		if !s.cfg.Enabled {
			continue
		}
		s.mu.Lock()
		tools, listNotes := s.tools, s.listNotes
		s.mu.Unlock()
		unread[s.cfg.Name] = listNotes
		byName[s.cfg.Name] = s
		st := serverTools{server: s.cfg.Name, prefix: s.cfg.prefix()}
		known[s.cfg.Name] = map[string]mcp.Tool{}
		for _, t := range tools {
			st.tools = append(st.tools, t.Name)
			if _, dup := known[s.cfg.Name][t.Name]; !dup {
				known[s.cfg.Name][t.Name] = t
			}
		}
		input = append(input, st)
	}
	names, notes := assignNames(m.cfg.PrefixMode, input, m.reserved)
	for server, n := range unread {
		if len(n) > 0 {
			notes[server] = append(append([]string(nil), n...), notes[server]...)
		}
	}

	desired := map[string]*proxyTool{}
	for name, p := range names {
		s := byName[p.server]
		t := known[p.server][p.tool]
		spec, note, err := specFor(&s.cfg, name, &t)
		if err != nil {
			notes[p.server] = append(notes[p.server], err.Error())
			continue
		}
		if note != "" {
			notes[p.server] = append(notes[p.server], note)
		}
		desired[name] = &proxyTool{srv: s, upstream: p.tool, spec: spec, asTask: runsAsTask(&t)}
	}
	var drop []string
	for name, old := range m.registered {
		if nt, ok := desired[name]; !ok || nt.srv != old.srv || nt.upstream != old.upstream || nt.asTask != old.asTask || !reflect.DeepEqual(nt.spec, old.spec) {
			drop = append(drop, name)
		} else {
			desired[name] = old
		}
	}
	sorted := make([]string, 0, len(desired))
	for name := range desired {
		sorted = append(sorted, name)
	}
	sort.Strings(sorted)
	var add []tool.Tool
	for _, name := range sorted {
		if old, ok := m.registered[name]; !ok || old != desired[name] {
			add = append(add, desired[name])
		}
	}
	// One swap, so a session never sees part of a server's tools, nor a tool whose
	// spec changed missing for a moment.
	failed := m.tools.Swap(drop, add)
	count := map[string]int{}
	for _, name := range sorted {
		t := desired[name]
		if err, ok := failed[name]; ok {
			notes[t.srv.cfg.Name] = append(notes[t.srv.cfg.Name], fmt.Sprintf("tool %q is not registered: %v", t.upstream, err))
			delete(desired, name)
			continue
		}
		count[t.srv.cfg.Name]++
	}
	m.registered = desired
	for _, s := range list {
		s.mu.Lock()
		s.nTools = count[s.cfg.Name]
		s.notes = notes[s.cfg.Name]
		s.mu.Unlock()
		for _, n := range notes[s.cfg.Name] {
			s.log.Debug("mcp server: naming", "note", n)
		}
	}
}

func toolError(msg string) error { return tool.Errorf(tool.KindUnavailable, "%s", msg) }
