package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// sessionPool holds the upstream sessions of a per_session server, one per daemon
// session. The supervisor's own connection still lists tools and is health-checked;
// a daemon session's first call opens its upstream session, which is closed when
// unused for SessionIdleTimeout, when it dies (the next call opens a new one), or
// when the server stops or restarts.
type sessionPool struct {
	mu     sync.Mutex
	conns  map[string]*pooled
	closed bool
	// ended says, by daemon session, why its upstream session was closed while the
	// daemon session lives on (idle, evicted for room, a restart, it died): the next
	// call, which opens a new one, tells the model that what the old one held (a
	// browser's pages and logins) is gone. At most maxEndedNotes are kept.
	ended map[string]string
}

const maxEndedNotes = 4096

// noteEnded records why sessionID's upstream session ended; the caller holds mu.
func (pool *sessionPool) noteEnded(sessionID, why string) {
	if pool.ended == nil {
		pool.ended = map[string]string{}
	}
	if _, ok := pool.ended[sessionID]; !ok && len(pool.ended) >= maxEndedNotes {
		for id := range pool.ended { // any one: the note is a courtesy
			delete(pool.ended, id)
			break
		}
	}
	pool.ended[sessionID] = why
}

type pooled struct {
	ready    chan struct{}      // closed once dialled; conn or err is set by then
	abort    context.CancelFunc // ends the dial while it runs (the server stops or restarts)
	conn     *conn
	err      error
	inflight int
	lastUsed time.Time
}

func (p *pooled) dialled() bool {
	select {
	case <-p.ready:
		return true
	default:
		return false
	}
}

// usable says whether a dialled entry can take calls.
func (p *pooled) usable() bool { return p.err == nil && p.conn.err() == nil }

// sessionConn returns the upstream connection of a daemon session, opening it on
// first use, and a release the caller calls when its call is over. ended, when the
// connection is new and the daemon session had one before, says why that one ended.
func (s *server) sessionConn(ctx context.Context, sessionID string) (c *conn, release func(), ended string, err error) {
	pool := &s.pool
	pool.mu.Lock()
	if pool.closed {
		pool.mu.Unlock()
		return nil, nil, "", tool.Errorf(tool.KindUnavailable, "mcp server %s is stopping", s.cfg.Name)
	}
	if pool.conns == nil {
		pool.conns = map[string]*pooled{}
	}
	var stale []*conn
	p := pool.conns[sessionID]
	if p != nil && p.dialled() && !p.usable() {
		delete(pool.conns, sessionID)
		if p.conn != nil {
			stale = append(stale, p.conn)
			pool.noteEnded(sessionID, "ended (the upstream went away)")
		}
		p = nil
	}
	opener := p == nil
	if opener {
		if len(pool.conns) >= s.cfg.MaxSessions {
			victim := pool.lruIdle()
			if victim == "" {
				pool.mu.Unlock()
				closeAll(stale)
				return nil, nil, "", tool.Errorf(tool.KindUnavailable,
					"mcp server %s has all its %d upstream sessions busy; try again shortly", s.cfg.Name, s.cfg.MaxSessions)
			}
			stale = append(stale, pool.conns[victim].conn)
			delete(pool.conns, victim)
			pool.noteEnded(victim, fmt.Sprintf("was closed to make room for another session's (max_sessions %d)", s.cfg.MaxSessions))
		}
		ended = pool.ended[sessionID]
		delete(pool.ended, sessionID)
		p = &pooled{ready: make(chan struct{})}
		pool.conns[sessionID] = p
	}
	// The opening outlives its caller, bounded by connect_timeout, and belongs to the
	// server's current connection (closeSessions abandons it). Abandoned with a caller
	// whose deadline is shorter than the server's start (a per-session browser, a
	// loaded machine), every opening was cut, and no call ever reached a session.
	var octx context.Context
	var abort context.CancelFunc
	if opener {
		octx, abort = context.WithCancel(context.WithoutCancel(ctx))
		p.abort = abort
	}
	p.inflight++
	p.lastUsed = time.Now()
	pool.mu.Unlock()
	closeAll(stale)

	release = func() {
		pool.mu.Lock()
		p.inflight--
		p.lastUsed = time.Now()
		pool.mu.Unlock()
	}
	if opener {
		go func() {
			defer abort()
			s.openSession(octx, sessionID, p)
		}()
	}
	select {
	case <-p.ready:
	case <-ctx.Done():
		release()
		return nil, nil, "", ctx.Err()
	}
	if p.err != nil {
		release()
		return nil, nil, "", tool.Errorf(tool.KindUnavailable, "mcp server %s: could not open an upstream session for this daemon session: %v", s.cfg.Name, p.err)
	}
	return p.conn, release, ended, nil
}

// openSession dials p's connection and publishes the outcome.
func (s *server) openSession(ctx context.Context, sessionID string, p *pooled) {
	var self atomic.Pointer[conn]
	// A stdio child that exits marks its connection dead: the next call opens another.
	hint := func() {
		if c := self.Load(); c != nil {
			c.markDead(errors.New("the upstream process exited"))
		}
	}
	c, _, err := dial(ctx, &s.cfg, s.log.With("daemon_session", sessionID), s.onNotification, hint)
	if c != nil {
		self.Store(c)
	}
	pool := &s.pool
	pool.mu.Lock()
	p.conn, p.err = c, err
	if pool.closed || pool.conns[sessionID] != p {
		// closeSessions took it out (and, if it was still dialling, cut the dial).
		p.conn, p.err = nil, errors.New("the server restarted or stopped while the session was opening")
	}
	if p.err != nil && pool.conns[sessionID] == p {
		delete(pool.conns, sessionID)
	}
	close(p.ready)
	pool.mu.Unlock()
	if err == nil && p.conn == nil {
		c.close()
	}
	if err == nil && p.conn != nil {
		s.log.Info("mcp server: upstream session opened for a daemon session", "daemon_session", sessionID)
	}
}

// lruIdle returns the least recently used dialled session with no call in flight.
func (pool *sessionPool) lruIdle() string {
	var victim string
	var oldest time.Time
	for id, p := range pool.conns {
		if p.inflight > 0 || !p.dialled() {
			continue
		}
		if victim == "" || p.lastUsed.Before(oldest) {
			victim, oldest = id, p.lastUsed
		}
	}
	return victim
}

// reapSessions closes upstream sessions idle longer than the timeout and dead ones.
func (s *server) reapSessions(now time.Time) {
	pool := &s.pool
	pool.mu.Lock()
	var gone []*conn
	for id, p := range pool.conns {
		if p.inflight > 0 || !p.dialled() {
			continue
		}
		if !p.usable() || now.Sub(p.lastUsed) >= s.cfg.SessionIdleTimeout {
			delete(pool.conns, id)
			if p.conn != nil {
				gone = append(gone, p.conn)
			}
			if p.usable() {
				pool.noteEnded(id, fmt.Sprintf("was closed after %s unused (session_idle_timeout)", s.cfg.SessionIdleTimeout))
			} else {
				pool.noteEnded(id, "ended (the upstream went away)")
			}
		}
	}
	pool.mu.Unlock()
	if len(gone) > 0 {
		s.log.Info("mcp server: closed idle upstream sessions", "count", len(gone))
	}
	closeAll(gone)
}

// closeSessions closes every upstream session, and abandons those still opening
// (their children are killed, their calls answer unavailable); stopping also
// refuses new ones.
func (s *server) closeSessions(stopping bool) {
	pool := &s.pool
	pool.mu.Lock()
	var all []*conn
	for id, p := range pool.conns {
		switch {
		case !p.dialled():
			p.abort()
		case p.conn != nil:
			all = append(all, p.conn)
			if !stopping {
				pool.noteEnded(id, "ended: the server was restarted")
			}
		}
		delete(pool.conns, id)
	}
	pool.closed = pool.closed || stopping
	pool.mu.Unlock()
	// A call on one of them ends now: its connection is cut.
	for _, c := range all {
		c.markDead(errors.New("the upstream server was restarted or stopped"))
	}
	closeAll(all)
}

// sessionCount is how many upstream sessions are open or opening.
func (s *server) sessionCount() int {
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	return len(s.pool.conns)
}

// closeAll closes the connections together: each may wait closeGrace for its server
// (a stdio child to exit, an HTTP server to answer the DELETE ending its session).
func closeAll(cs []*conn) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c != nil {
			wg.Go(c.close)
		}
	}
	wg.Wait()
}

// sessionKey is the daemon session a call belongs to; calls without one share the
// supervisor's connection.
func sessionKey(tc *tool.Context) string {
	if tc.Session == nil {
		return ""
	}
	return tc.Session.ID
}

// checkPooled pings a daemon session's upstream session after a call to it missed
// its deadline: pooled sessions have no health checks of their own, and one whose
// server hangs or stopped reading would otherwise time out every call of its daemon
// session for as long as they keep it in use. The missed call and a missed ping, as
// two missed pings on the server's own connection, close it.
func (s *server) checkPooled(c *conn) {
	c.spawn(func() {
		err := c.ping(s.m.pingTimeout())
		if err != nil && c.err() == nil && (isTimeout(err) || isTransportFailure(err) || isSessionLost(err)) {
			c.markDead(fmt.Errorf("a call missed its deadline and the health check after it failed: %w", err))
		}
	})
}

// CloseSession closes the upstream sessions opened for a daemon session that is gone
// for good (deleted by its client or by retention), on every per_session server:
// left to the idle timeout, a browser's would live on for minutes with the pages,
// cookies and logins of a session that no longer exists. One still opening is
// abandoned, a call still on one ends unavailable.
func (m *Manager) CloseSession(ctx context.Context, sessionID string) {
	for _, s := range m.serverList() {
		if s.cfg.Pooling == PoolPerSession {
			s.closeSession(sessionID)
		}
	}
}

// closeSession closes the upstream session of one daemon session, if it has one.
func (s *server) closeSession(sessionID string) {
	pool := &s.pool
	pool.mu.Lock()
	p := pool.conns[sessionID]
	if p == nil {
		pool.mu.Unlock()
		return
	}
	delete(pool.conns, sessionID)
	delete(pool.ended, sessionID)
	if !p.dialled() {
		p.abort() // openSession sees it taken out and closes what it dialled
	}
	c := p.conn
	pool.mu.Unlock()
	if c == nil {
		return
	}
	c.markDead(errors.New("the daemon session it was opened for was deleted"))
	c.close()
	s.log.Info("mcp server: upstream session closed with its daemon session", "daemon_session", sessionID)
}
