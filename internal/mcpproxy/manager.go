package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
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
	persisted := m.loadPersisted(ctx)

	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range persisted {
		if _, dup := m.servers[s.cfg.Name]; dup {
			m.log.Warn("mcp server in the store has the name of a configured one; the configured one wins", "mcp_server", s.cfg.Name)
			continue
		}
		// Added before names were checked for overlaps: the configured servers,
		// then the stored ones in name order, keep their name space.
		if clash := m.clashLocked(&s.cfg); clash != "" {
			m.log.Error("mcp server in the store is not started: "+clash+"; remove it (DELETE /v1/mcp/servers/"+s.cfg.Name+")", "mcp_server", s.cfg.Name)
			continue
		}
		m.servers[s.cfg.Name] = s
		m.metrics.up(s.cfg.Name, false)
	}
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

func (m *Manager) loadPersisted(ctx context.Context) []*server {
	if m.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	recs, err := m.store.ListMCPServers(ctx)
	if err != nil {
		m.log.Error("mcp proxy: could not load the servers added at run time", "err", err)
		return nil
	}
	var out []*server
	for _, r := range recs {
		var sc ServerConfig
		if err := json.Unmarshal(r.Config, &sc); err != nil {
			m.log.Error("mcp proxy: stored server config does not parse; skipped", "mcp_server", r.Name, "err", err)
			continue
		}
		sc.Name = r.Name
		if err := sc.Validate(); err != nil {
			m.log.Error("mcp proxy: stored server config is invalid; skipped", "mcp_server", r.Name, "err", err)
			continue
		}
		out = append(out, newServer(m, sc, true))
	}
	return out
}

// Stop closes every connection (stdio children are killed if they do not exit when
// their stdin closes), waits for the supervisors and unregisters the tools.
func (m *Manager) Stop() {
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
		if err := m.store.PutMCPServer(ctx, sc.Name, b); err != nil {
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
// server from the configuration is removed until the daemon restarts.
func (m *Manager) Remove(name string) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	s := m.server(name)
	if s == nil {
		return fmt.Errorf("%w: %s", ErrUnknownServer, name)
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

// Restart drops a server's connection and connects again at once (no backoff). It
// fails with ErrUnknownServer, ErrServerDisabled or ErrNotRunning.
func (m *Manager) Restart(name string) error {
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

// Status reports every server, by name.
func (m *Manager) Status() []ServerStatus {
	list := m.serverList()
	out := make([]ServerStatus, len(list))
	for i, s := range list {
		out[i] = s.status()
	}
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
