package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

var (
	errRestart = errors.New("restart requested")
	errStopped = errors.New("stopped")
)

// server supervises one upstream server: it connects, watches and reconnects, and
// holds what Status reports.
type server struct {
	m   *Manager
	cfg ServerConfig // with defaults
	// log and every text shown about the server (errText) pass through redact.
	log    *slog.Logger
	redact *redactor

	mu          sync.Mutex
	persisted   bool
	stored      string // persisted: the configuration as the store keeps it (see storedForm)
	state       State
	lastErr     string
	lastErrAt   time.Time
	since       time.Time
	downSince   time.Time // since when it is not ready, over an outage's attempts; zero while ready or disabled
	restarts    int
	nextAttempt time.Time  // while failed: when the supervisor tries again
	tools       []mcp.Tool // last known list, kept while the server is down
	listNotes   []string   // entries of the last list that could not be read
	notes       []string
	nTools      int           // registered
	conn        *conn         // set while ready
	pool        sessionPool   // per_session pooling: one upstream session per daemon session
	changed     chan struct{} // closed and replaced on every state change

	wake    chan struct{} // restart now
	check   chan struct{} // health check now
	refresh chan struct{} // list tools again
	cancel  context.CancelFunc
	done    chan struct{}
}

func newServer(m *Manager, cfg ServerConfig, persisted bool) *server {
	stored := ""
	if persisted {
		stored = storedForm(cfg)
	}
	cfg = cfg.withDefaults()
	if m.cfg.WorkDir != "" && cfg.Transport == TransportStdio {
		cfg.Dir = filepath.Join(m.cfg.WorkDir, cfg.Name)
	}
	cfg.privateEnv = m.cfg.PrivateEnv
	red := newRedactor(&cfg)
	s := &server{
		m: m, cfg: cfg, persisted: persisted, stored: stored, redact: red,
		log:     slog.New(redactHandler{m.log.Handler(), red}).With("mcp_server", cfg.Name),
		state:   StateConnecting,
		since:   time.Now(),
		changed: make(chan struct{}),
		wake:    make(chan struct{}, 1),
		check:   make(chan struct{}, 1),
		refresh: make(chan struct{}, 1),
	}
	if !cfg.Enabled {
		s.state = StateDisabled
	} else {
		s.downSince = s.since
	}
	return s
}

// storedForm is a server configuration as Add writes it to the store; what the
// store gives back, read and written again so, is the same text, whatever the
// database made of its spacing and key order. Sync compares these.
func storedForm(sc ServerConfig) string {
	b, err := json.Marshal(sc)
	if err != nil {
		return ""
	}
	return string(b)
}

// start runs the supervisor on the manager's wait group.
func (s *server) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	s.cancel = cancel
	s.done = make(chan struct{})
	s.m.wg.Add(1)
	go func() {
		defer s.m.wg.Done()
		defer close(s.done)
		s.run(ctx)
	}()
}

// stop ends the supervisor and waits for it (its connection is closed by then).
func (s *server) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
}

func (s *server) run(ctx context.Context) {
	defer s.closeSessions(true)
	// failures counts the failed attempts of the current outage. A connection that
	// stays up longer than the delay its outage had reached, and than stableUptime,
	// ends the outage: how long an earlier outage lasted must not delay the recovery
	// from the next one. One lost sooner continues it, so that a server that crashes
	// soon after each connect is not restarted every MinBackoff or so for ever.
	failures := 0
	first := true
	for ctx.Err() == nil {
		if !first {
			s.mu.Lock()
			s.restarts++
			s.mu.Unlock()
			s.m.metrics.restart(s.cfg.Name)
		}
		first = false
		s.setState(StateConnecting, "", nil)
		start := time.Now()
		c, tools, err := s.connect(ctx)
		if errors.Is(err, errRestart) {
			s.log.Info("mcp server: restart requested; the connection attempt under way was abandoned")
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			delay := s.m.backoff(failures)
			s.log.Warn("mcp server: connection failed", "err", s.errText(err), "attempt", failures, "retry_in", delay.Round(time.Millisecond).String())
			s.setFailed(s.errText(err), delay)
			if !s.pause(ctx, delay) {
				return
			}
			continue
		}
		outage := failures
		failures = 0
		attrs := []any{"tools", len(tools), "duration_ms", float64(time.Since(start).Microseconds()) / 1000}
		s.mu.Lock()
		if s.restarts > 0 && !s.downSince.IsZero() {
			// Back: say for how long it was gone, which the loss's line, maybe hours
			// of log before, would otherwise have to tell.
			attrs = append(attrs, "down_for", time.Since(s.downSince).Round(time.Millisecond).String())
		}
		s.mu.Unlock()
		s.log.Info("mcp server: connected", attrs...)
		s.mu.Lock()
		s.tools, s.listNotes = tools, c.listing.takeNotes()
		s.mu.Unlock()
		s.m.syncRegistry() // before ready: Status never shows ready without the tools
		s.setState(StateReady, "", c)
		up := time.Now()

		reason := s.watch(ctx, c)
		answered := upstreamAnswers(&s.cfg, reason)
		// How a stdio child ended (its signal or status, its last stderr) is what the
		// operator needs; the in-flight call that noticed the death can come first.
		reason = c.lastWords(reason)
		// Calls fail fast from here on; then the connection closes.
		var delay time.Duration
		switch {
		case ctx.Err() != nil:
			c.retire(errors.New("was stopped"))
			s.setState(StateFailed, "stopped", nil)
		case errors.Is(reason, errRestart):
			// Only Manager.Restart asks (the API's and toolserverctl's restart).
			c.retire(errors.New("was restarted by an operator"))
			s.log.Info("mcp server: restarting")
			s.setState(StateConnecting, "", nil)
		case answered:
			// The upstream is up (it restarted and forgot the session): waiting
			// would only keep its tools unavailable.
			s.log.Warn("mcp server: the upstream no longer knows the session; reconnecting at once", "err", s.errText(reason))
			s.setState(StateConnecting, s.errText(reason), nil)
		default:
			failures = 1 // the lost connection is a new outage's first failure
			if outage > 0 && time.Since(up) < max(s.m.backoffCeiling(outage), s.m.stableUptime()) {
				failures = outage + 1 // or the last one's next, when it came back only briefly
			}
			delay = s.m.backoff(failures)
			s.log.Warn("mcp server: connection lost", "err", s.errText(reason), "retry_in", delay.Round(time.Millisecond).String())
			s.setFailed(s.errText(reason), delay)
		}
		// Upstream sessions of daemon sessions end with the server's: a restarted
		// server has forgotten their state anyway.
		s.closeSessions(false)
		c.close()
		if ctx.Err() != nil {
			return
		}
		if delay > 0 && !s.pause(ctx, delay) {
			return
		}
	}
}

// connect makes one connection attempt. A restart asked for meanwhile abandons it
// (its stdio child is killed) and is reported as errRestart: a hung attempt must
// not hold a restart until the connect timeout.
func (s *server) connect(ctx context.Context) (*conn, []mcp.Tool, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-s.wake:
			cancel(errRestart)
			if !errors.Is(context.Cause(actx), errRestart) {
				signal(s.wake) // the attempt was over already: the restart is watch's
			}
		case <-actx.Done():
		}
	}()
	c, tools, err := dial(actx, &s.cfg, s.log, s.onNotification, s.checkNow)
	cancel(nil)
	<-watched
	if errors.Is(context.Cause(actx), errRestart) {
		if c != nil {
			c.close() // connected as the restart came: start over all the same
		}
		return nil, nil, errRestart
	}
	return c, tools, err
}

// upstreamAnswers reports whether a connection ended because the upstream refused
// its session (404, "session not found"): a refusal is an answer, so the upstream
// is up — it restarted and forgot the session — and a new one can be opened at
// once. Only HTTP transports have sessions to forget; a stdio child's stderr, which
// describe adds to reason, could say anything.
func upstreamAnswers(cfg *ServerConfig, reason error) bool {
	return cfg.Transport != TransportStdio && !errors.Is(reason, errRestart) && !errors.Is(reason, errStopped) &&
		isSessionLost(reason)
}

// minRefreshInterval spaces the tool-list refreshes of a server: each one lists
// every tool and brings the whole registry in line, and a server may announce
// tools/list_changed without pause.
const minRefreshInterval = time.Second

// watch returns why a ready connection ended: lost, failed health checks, a
// restart, or the supervisor stopping. Tool-list refreshes run beside it, one at a
// time and at most one per minRefreshInterval, so that a server hanging in
// tools/list is still health-checked.
func (s *server) watch(ctx context.Context, c *conn) error {
	tick := time.NewTicker(s.m.cfg.HealthInterval)
	defer tick.Stop()
	timeouts := 0
	type listing struct {
		tools []mcp.Tool
		err   error
	}
	listed := make(chan listing, 1)
	refreshing, again := false, false
	var lastRefresh time.Time
	var delayed <-chan time.Time // a refresh waiting for minRefreshInterval
	refresh := func() {
		if refreshing {
			again = true
			return
		}
		if wait := minRefreshInterval - time.Since(lastRefresh); wait > 0 {
			if delayed == nil {
				delayed = time.After(wait)
			}
			return
		}
		refreshing, lastRefresh = true, time.Now()
		c.spawn(func() {
			lctx, cancel := context.WithTimeout(c.ctx, s.cfg.ConnectTimeout)
			defer cancel()
			tools, err := c.listTools(lctx)
			listed <- listing{tools, err}
		})
	}
	for {
		select {
		case <-ctx.Done():
			return errStopped
		case <-c.dead:
			return fmt.Errorf("connection lost: %w", c.err())
		case <-s.wake:
			return errRestart
		case <-s.refresh:
			refresh()
			continue
		case <-delayed:
			delayed = nil
			refresh()
			continue
		case l := <-listed:
			refreshing = false
			if l.err != nil {
				if c.err() == nil && isConnectionGone(l.err) {
					c.markDead(l.err)
				}
				s.log.Warn("mcp server: refreshing the tool list failed", "err", s.errText(l.err))
			} else {
				s.mu.Lock()
				changed := !sameTools(s.tools, l.tools)
				s.tools, s.listNotes = l.tools, c.listing.takeNotes()
				s.mu.Unlock()
				if changed {
					s.log.Info("mcp server: tool list changed", "tools", len(l.tools))
				} else {
					// Servers (per_session ones above all) announce changes that change
					// nothing: not worth an operator's attention.
					s.log.Debug("mcp server: tool list announced changed, the same", "tools", len(l.tools))
				}
				s.m.syncRegistry()
			}
			if again {
				again = false
				refresh()
			}
			continue
		case <-tick.C:
			if s.cfg.Pooling == PoolPerSession {
				s.reapSessions(time.Now())
			}
		case <-s.check:
		}
		select {
		case <-c.dead:
			continue
		default:
		}
		err := c.ping(s.m.pingTimeout())
		switch {
		case c.err() != nil:
		case err == nil:
			timeouts = 0
		case isTimeout(err):
			// A busy server may miss one deadline; two in a row is dead.
			if timeouts++; timeouts >= 2 {
				c.markDead(fmt.Errorf("health check failed twice: %w", err))
			}
		case isTransportFailure(err) || isSessionLost(err):
			c.markDead(fmt.Errorf("health check failed: %w", err))
		default:
			// An error answer (a server without ping) is still an answer.
			timeouts = 0
		}
	}
}

// pause waits d (the backoff setFailed announced), or less when a restart is asked
// for. It reports whether to go on.
func (s *server) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-s.wake:
	}
	return true
}

func (s *server) onNotification(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationProgress):
		s.m.progress.handle(n)
	case mcp.MethodNotificationToolsListChanged:
		signal(s.refresh)
	}
}

// checkNow asks the supervisor for a health check (something looked wrong).
func (s *server) checkNow() { signal(s.check) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (s *server) setState(st State, lastErr string, c *conn) {
	s.setStateRetry(st, lastErr, c, time.Time{})
}

// setFailed marks the server failed, with its next attempt in delay.
func (s *server) setFailed(lastErr string, delay time.Duration) {
	s.setStateRetry(StateFailed, lastErr, nil, time.Now().Add(delay))
}

func (s *server) setStateRetry(st State, lastErr string, c *conn, next time.Time) {
	s.mu.Lock()
	if st != s.state {
		s.since = time.Now()
	}
	switch {
	case st == StateReady || st == StateDisabled:
		s.downSince = time.Time{}
	case s.downSince.IsZero():
		s.downSince = s.since
	}
	s.state = st
	if lastErr != "" {
		s.lastErr = lastErr // kept after recovery: why the server last went down
		s.lastErrAt = time.Now()
	}
	s.conn = c
	s.nextAttempt = next
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.m.metrics.up(s.cfg.Name, st == StateReady)
}

// liveConn is the connection calls use, nil unless the server is ready.
func (s *server) liveConn() *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StateReady || s.conn == nil || s.conn.err() != nil {
		return nil
	}
	return s.conn
}

// awaitConn waits up to d for a connection other than old to be ready: while the
// supervisor has yet to notice old's end, and while an attempt is under way. A
// server in backoff ends the wait at once: a call never waits through backoff.
func (s *server) awaitConn(ctx context.Context, old *conn, d time.Duration) *conn {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		s.mu.Lock()
		c, st, changed := s.conn, s.state, s.changed
		s.mu.Unlock()
		switch {
		case st == StateReady && c != nil && c != old && c.err() == nil:
			return c
		case st == StateFailed || st == StateDisabled:
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		case <-timer.C:
			return nil
		}
	}
}

// unavailable is the error a call gets while the server is down: since when, why,
// and when it is tried again.
func (s *server) unavailable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A connection that died before the supervisor noticed: the state still says
	// ready, which would read as no reason at all (status does the same).
	if s.state == StateReady && s.conn != nil {
		if err := s.conn.err(); err != nil {
			return toolError(fmt.Sprintf("mcp server %s is not available: its connection was lost (%s); it is being reconnected", s.cfg.Name, s.errText(err)))
		}
	}
	// Since when it is down, not since its latest attempt: an outage goes from
	// failed to connecting and back at every attempt.
	down := s.downSince
	if down.IsZero() { // disabled
		down = s.since
	}
	msg := fmt.Sprintf("mcp server %s is not available (%s, down since %s)", s.cfg.Name, s.state, down.UTC().Format(time.RFC3339))
	if s.lastErr != "" {
		msg += ": " + s.lastErr
	}
	switch {
	case s.state == StateConnecting:
		msg += "; a connection attempt is under way"
	case !s.nextAttempt.IsZero():
		msg += fmt.Sprintf("; next attempt in %s (at %s)", max(time.Until(s.nextAttempt), 0).Round(100*time.Millisecond),
			s.nextAttempt.UTC().Format(time.RFC3339))
	}
	return toolError(msg)
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerStatus{
		Name: s.cfg.Name, Transport: s.cfg.Transport, State: s.state, Tools: s.nTools,
		LastError: s.lastErr, LastErrorAt: s.lastErrAt, Since: s.since, DownSince: s.downSince, Restarts: s.restarts, NextAttempt: s.nextAttempt,
		Notes: append([]string(nil), s.notes...), Persisted: s.persisted,
		UpstreamSessions: s.sessionCount(), TrustAnnotations: s.cfg.trustsAnnotations(),
	}
	// A connection that has died is not ready even before the supervisor notices:
	// the status agrees with liveConn, which calls use.
	if s.state == StateReady && s.conn != nil {
		if err := s.conn.err(); err != nil {
			st.State, st.LastError, st.LastErrorAt = StateFailed, s.errText(s.conn.describe(err)), time.Now()
		}
	}
	return st
}

// backoff is the delay after the n-th consecutive failure (1-based): MinBackoff
// doubling up to MaxBackoff, drawn uniformly from its upper half so that servers
// that failed together do not retry together.
func (m *Manager) backoff(n int) time.Duration {
	d := m.backoffCeiling(n)
	return d/2 + rand.N(d/2+1)
}

// backoffCeiling is the longest delay backoff(n) returns.
func (m *Manager) backoffCeiling(n int) time.Duration {
	d := min(m.cfg.MinBackoff, m.cfg.MaxBackoff)
	for i := 1; i < n && d < m.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, m.cfg.MaxBackoff)
}

// stableUptime is how long a connection must stay up, at least, to end its
// server's outage: 10s, or MaxBackoff if shorter (the operator's longest delay).
// Measured against the delay the outage had reached alone, which starts at
// MinBackoff, a server up half a second after each connect never let it grow.
func (m *Manager) stableUptime() time.Duration {
	return min(10*time.Second, m.cfg.MaxBackoff)
}

// pingTimeout bounds one health check.
func (m *Manager) pingTimeout() time.Duration {
	return min(max(m.cfg.HealthInterval, time.Second), 10*time.Second)
}

// maxErrText bounds an error's text in the status and the log: it may quote what the
// server sent (an error message of any length).
const maxErrText = 1000

// errText is err's text as the status, the log and the model may see it: redacted
// (see redactor), then cut at maxErrText.
func (s *server) errText(err error) string { return s.redact.clip(err.Error()) }

// sameTools reports whether two tool lists declare the same tools, in the same order.
func sameTools(a, b []mcp.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
