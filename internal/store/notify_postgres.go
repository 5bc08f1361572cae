package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotifierStopped is returned by PGNotifier.Notify after Stop, and by Start after
// Stop or a second Start.
var ErrNotifierStopped = errors.New("notifier is stopped")

// PGNotifierConfig configures a PGNotifier. Only URL is required.
type PGNotifierConfig struct {
	// URL is the database, as for OpenPostgres (search_path included).
	URL string
	// Channel is the LISTEN/NOTIFY channel. Default: "toolserverd." + the URL's current
	// schema, so that deployments (and tests) sharing one database in separate schemas
	// do not wake each other. Replicas sharing a schema share the channel.
	Channel string
	// Buffer is the capacity of each subscriber's channel. Default DefaultNotifyBuffer.
	Buffer int
	// MinBackoff and MaxBackoff bound the wait between reconnection attempts of the
	// listener (doubling, with jitter). Defaults 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// PingInterval is how long the listener waits without a notification before it
	// checks its connection (a silently dead TCP connection would wait forever).
	// Default 30s.
	PingInterval time.Duration
	// Logger receives reconnection warnings. Default: discard.
	Logger *slog.Logger
}

// Validate reports a configuration NewPGNotifierWithConfig would refuse.
func (c PGNotifierConfig) Validate() error {
	if c.URL == "" {
		return errors.New("store: notifier: no database url")
	}
	if len(c.Channel) > 63 {
		return fmt.Errorf("store: notifier: channel %q is longer than 63 bytes", c.Channel)
	}
	if c.Buffer < 0 || c.MinBackoff < 0 || c.MaxBackoff < 0 || c.PingInterval < 0 {
		return errors.New("store: notifier: buffer, backoffs and ping interval must not be negative")
	}
	if c.MaxBackoff > 0 && c.MinBackoff > c.MaxBackoff {
		return fmt.Errorf("store: notifier: min backoff %s is above max backoff %s", c.MinBackoff, c.MaxBackoff)
	}
	return nil
}

func (c PGNotifierConfig) withDefaults() PGNotifierConfig {
	if c.MinBackoff == 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = max(5*time.Second, c.MinBackoff)
	}
	if c.PingInterval == 0 {
		c.PingInterval = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// PGNotifier is a Notifier over PostgreSQL LISTEN/NOTIFY: a notification sent by any
// replica reaches the subscribers of every replica listening on the channel (its own
// included: local subscribers are served by the same path).
//
// One dedicated connection LISTENs and waits for notifications in a goroutine; when it
// drops, the goroutine reconnects with backoff and LISTENs again, then sends every
// subscriber an empty payload, since notifications sent meanwhile are lost. NOTIFY goes
// through a small pool. Each notification on the wire is "topic|payload".
//
// Lifecycle: NewPGNotifier, Start, …, Stop. It is not restartable.
type PGNotifier struct {
	cfg     PGNotifierConfig
	listen  *pgx.ConnConfig
	pool    *pgxpool.Pool
	channel string
	hub     *notifyHub
	log     *slog.Logger

	mu       sync.Mutex // serializes Start and Stop
	started  bool
	cancel   context.CancelFunc
	done     chan struct{}
	stopped  atomic.Bool
	stopOnce sync.Once

	listening  atomic.Bool
	pid        atomic.Uint32 // the listener's backend, for tests
	reconnects atomic.Uint64
}

// NewPGNotifier returns a notifier on the database at url with the default
// configuration. It checks the database answers; call Start to receive.
func NewPGNotifier(ctx context.Context, url string) (*PGNotifier, error) {
	return NewPGNotifierWithConfig(ctx, PGNotifierConfig{URL: url})
}

// NewPGNotifierWithConfig is NewPGNotifier with a configuration.
func NewPGNotifierWithConfig(ctx context.Context, cfg PGNotifierConfig) (*PGNotifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("store: notifier: %w", err)
	}
	pcfg.MaxConns = 4 // pg_notify is one short statement
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("store: notifier: %w", err)
	}
	n := &PGNotifier{
		cfg: cfg, listen: pcfg.ConnConfig.Copy(), pool: pool, channel: cfg.Channel,
		hub: newNotifyHub(cfg.Buffer), log: cfg.Logger, done: make(chan struct{}),
	}
	if n.channel == "" {
		var schema *string
		if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			pool.Close()
			return nil, fmt.Errorf("store: notifier %s: %w", describePG(pcfg.ConnConfig), err)
		}
		if schema == nil {
			pool.Close()
			return nil, fmt.Errorf("store: notifier %s: no current schema: check search_path", describePG(pcfg.ConnConfig))
		}
		n.channel = notifyChannelFor(*schema)
	} else if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: notifier %s: %w", describePG(pcfg.ConnConfig), err)
	}
	return n, nil
}

// notifyChannelFor is the default channel of a schema, within PostgreSQL's 63 bytes.
func notifyChannelFor(schema string) string {
	c := "toolserverd." + schema
	if len(c) <= 63 {
		return c
	}
	h := fnv.New64a()
	h.Write([]byte(schema))
	return fmt.Sprintf("toolserverd.%x", h.Sum64())
}

// Channel is the LISTEN/NOTIFY channel in use.
func (n *PGNotifier) Channel() string { return n.channel }

// Start connects the listener and LISTENs, then returns; a goroutine receives until
// Stop is called or ctx ends (call Stop anyway: it closes the NOTIFY pool). If the
// first connection fails, Start returns the error and nothing runs (Start may be tried
// again).
func (n *PGNotifier) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped.Load() || n.started {
		return fmt.Errorf("store: notifier: start: %w", ErrNotifierStopped)
	}
	conn, err := n.connect(ctx)
	if err != nil {
		return fmt.Errorf("store: notifier: start: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	n.started, n.cancel = true, cancel
	go n.run(runCtx, conn)
	return nil
}

// Stop ends the listener, waits for its goroutine, and closes the connections. Notify
// fails afterwards; subscriptions stay open (and silent) until ended. Safe to call more
// than once, and without Start.
func (n *PGNotifier) Stop() {
	n.stopOnce.Do(func() {
		n.stopped.Store(true)
		n.mu.Lock() // waits for a Start in progress
		started, cancel := n.started, n.cancel
		n.mu.Unlock()
		if started {
			cancel()
			<-n.done
		}
		n.pool.Close()
	})
}

// Notify sends "topic|payload" on the channel; every listening replica (this one too)
// delivers payload to its topic subscribers. Before Start (or while the listener
// reconnects) it still reaches other replicas, not this one's subscribers.
func (n *PGNotifier) Notify(ctx context.Context, topic, payload string) error {
	if err := checkNotification(topic, payload); err != nil {
		return err
	}
	if n.stopped.Load() {
		return fmt.Errorf("notify: %w", ErrNotifierStopped)
	}
	if _, err := n.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, n.channel, topic+"|"+payload); err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	return nil
}

// Subscribe: see Notifier. It may be called before Start.
func (n *PGNotifier) Subscribe(topic string) (<-chan string, func()) {
	return n.hub.subscribe(topic)
}

// Listening reports whether the listener is connected and LISTENing now (for /readyz).
func (n *PGNotifier) Listening() bool { return n.listening.Load() }

// Reconnects counts how often the listener connection was re-established.
func (n *PGNotifier) Reconnects() uint64 { return n.reconnects.Load() }

// Dropped counts payloads not delivered because a subscriber's channel was full.
func (n *PGNotifier) Dropped() uint64 { return n.hub.dropped.Load() }

// connect opens the listener connection and LISTENs.
func (n *PGNotifier) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, n.listen)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{n.channel}.Sanitize()); err != nil {
		closePGConn(conn)
		return nil, fmt.Errorf("listen: %w", err)
	}
	n.pid.Store(conn.PgConn().PID())
	n.listening.Store(true)
	return conn, nil
}

func closePGConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// run receives on conn; when the connection fails it reconnects until ctx ends.
func (n *PGNotifier) run(ctx context.Context, conn *pgx.Conn) {
	defer close(n.done)
	for {
		err := n.receive(ctx, conn)
		n.listening.Store(false)
		closePGConn(conn)
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("notifier: listener connection lost; reconnecting", "channel", n.channel, "err", err)
		if conn = n.reconnect(ctx); conn == nil {
			return
		}
		n.reconnects.Add(1)
		n.log.Info("notifier: listening again", "channel", n.channel)
		// Whatever was notified while we were away is lost: tell everyone to re-check.
		n.hub.broadcast("")
	}
}

// receive dispatches notifications until the connection fails or ctx ends.
func (n *PGNotifier) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, n.cfg.PingInterval)
		note, err := conn.WaitForNotification(wctx)
		cancel()
		if err == nil {
			n.dispatch(note.Payload)
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed() {
			// Quiet for a while: make sure the connection is still there.
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = conn.Ping(pctx)
			cancel()
			if err == nil {
				continue
			}
		}
		return err
	}
}

func (n *PGNotifier) dispatch(raw string) {
	topic, payload, ok := strings.Cut(raw, "|")
	if !ok {
		n.log.Debug("notifier: ignoring a notification without a topic", "channel", n.channel)
		return
	}
	n.hub.publish(topic, payload)
}

// reconnect retries connect with backoff; nil when ctx ends first.
func (n *PGNotifier) reconnect(ctx context.Context) *pgx.Conn {
	wait := n.cfg.MinBackoff
	for {
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		conn, err := n.connect(ctx)
		if err == nil {
			return conn
		}
		if ctx.Err() != nil {
			return nil
		}
		n.log.Warn("notifier: reconnect failed", "channel", n.channel, "err", err, "retry_in", wait)
		wait = min(2*wait, n.cfg.MaxBackoff)
	}
}
