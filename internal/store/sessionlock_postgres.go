package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PGSessionLocks serializes work on a session across every replica sharing one
// PostgreSQL database, with session-level advisory locks. A held lock keeps its
// connection for as long as it is held, so the locks have a pool of their own and
// never starve the store's queries. A lock dies with its connection: a replica that
// crashes, or whose connection breaks, releases the locks it held.
type PGSessionLocks struct {
	pool   *pgxpool.Pool
	prefix string // the schema: tests isolated by schema share one database
}

// DefaultSessionLockConns is the size of the lock pool when none is given: at most
// this many sessions of one replica run an unsafe tool at the same time; more wait
// for a connection.
const DefaultSessionLockConns = 32

// lockConnName is the SQL expression of the application_name of replica $1's lock
// connections: the survivors find them by it (ExpireReplicas). It names the schema
// (hashed: tests isolated by schema share a database) and the replica, within the 63
// bytes PostgreSQL keeps.
const lockConnName = `left('toolserverd-locks ' || left(md5(current_schema() || '/' || $1), 8) || ' ' || $1, 63)`

// NewPGSessionLocks connects a pool of at most maxConns connections (0: the default)
// for the replica named replicaID. Its connections are named after the replica, so
// that when the replica stops answering (a frozen process, a lost node, whose
// connections PostgreSQL keeps open for as long as TCP keepalive takes: two hours by
// default) the others can close them and free the sessions it held.
func NewPGSessionLocks(ctx context.Context, url string, maxConns int, replicaID string) (*PGSessionLocks, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: session locks: %w", err)
	}
	if maxConns <= 0 {
		maxConns = DefaultSessionLockConns
	}
	cfg.MaxConns = int32(min(maxConns, 1<<20))
	cfg.MinConns = 0
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT set_config('application_name', `+lockConnName+`, false)`, replicaID)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: session locks: %w", err)
	}
	var schema *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: session locks %s: %w", describePG(cfg.ConnConfig), err)
	}
	if schema == nil {
		pool.Close()
		return nil, fmt.Errorf("store: session locks %s: no current schema: check search_path", describePG(cfg.ConnConfig))
	}
	return &PGSessionLocks{pool: pool, prefix: "toolserverd.session:" + *schema + ":"}, nil
}

// key maps a session id to a 64-bit advisory lock key. A collision between two
// sessions only serializes them needlessly.
func (l *PGSessionLocks) key(sessionID string) int64 {
	h := fnv.New64a()
	h.Write([]byte(l.prefix + sessionID))
	return int64(h.Sum64())
}

// LockSession waits until no other holder (on any replica) has sessionID's lock, or
// ctx ends. The returned unlock must be called exactly once.
func (l *PGSessionLocks) LockSession(ctx context.Context, sessionID string) (unlock func(), err error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: lock session %s: %w", sessionID, err)
	}
	key := l.key(sessionID)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		// A cancelled wait may leave the connection mid-query: never reuse it.
		destroy(conn)
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		return nil, fmt.Errorf("store: lock session %s: %w", sessionID, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var released bool
		if err := conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, key).Scan(&released); err != nil || !released {
			// Closing the connection releases the lock for certain.
			destroy(conn)
			return
		}
		conn.Release()
	}, nil
}

// destroy closes a pooled connection instead of returning it to the pool.
func destroy(conn *pgxpool.Conn) {
	c := conn.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// Close closes the pool; locks still held are released with their connections.
func (l *PGSessionLocks) Close() {
	l.pool.Close()
}
