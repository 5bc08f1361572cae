package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// replicaClaimCheck is how often the connection holding a replica's claim is checked,
// and taken again after it was lost (a PostgreSQL restart).
var replicaClaimCheck = 10 * time.Second

// ClaimReplica makes sure no other live process uses replica id on this database and
// schema: it holds a session-level advisory lock naming the id, on a connection of its
// own, until release. A second process starting with the same id gets ErrConflict
// rather than failing the first one's unfinished calls as its own previous run's
// (AbandonCalls) and sharing its heartbeat. A lost connection loses the lock; it is
// checked every 10 s and taken again, and lost(err) is told when that fails.
func (p *Postgres) ClaimReplica(ctx context.Context, id string, lost func(error)) (release func(), err error) {
	conn, key, err := p.lockReplica(ctx, id)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	stop, done := make(chan struct{}), make(chan struct{})
	// A ping or a new connection may take seconds on a loaded host; the ticker waits.
	timeout := max(replicaClaimCheck/2, 5*time.Second)
	go func() {
		defer close(done)
		t := time.NewTicker(replicaClaimCheck)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			mu.Lock()
			cur := conn
			mu.Unlock()
			pctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := errors.New("no connection")
			if cur != nil {
				err = cur.Ping(pctx)
			}
			cancel()
			if err == nil {
				continue
			}
			if cur != nil {
				_ = cur.Close(context.Background())
			}
			lctx, cancel := context.WithTimeout(context.Background(), timeout)
			next, nextKey, lerr := p.lockReplica(lctx, id)
			cancel()
			mu.Lock()
			conn = next // nil on failure: tried again at the next tick
			if next != nil {
				key = nextKey
			}
			mu.Unlock()
			if lerr != nil && lost != nil {
				lost(fmt.Errorf("the claim on replica_id %q was lost (%v) and could not be taken again: %w", id, err, lerr))
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-done
			mu.Lock()
			defer mu.Unlock()
			if conn != nil {
				// Unlocked before the connection closes: closing the session releases
				// its advisory locks too, but only once its server process has ended,
				// after Close returns; a claim right after release would be refused.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key)
				_ = conn.Close(ctx)
			}
		})
	}, nil
}

// lockReplica opens a connection and takes the advisory lock of replica id in the
// connection's schema (tests share one database, one schema each).
func (p *Postgres) lockReplica(ctx context.Context, id string) (*pgx.Conn, int64, error) {
	conn, err := pgx.ConnectConfig(ctx, p.connCfg)
	if err != nil {
		return nil, 0, fmt.Errorf("store: claim replica_id %q: %w", id, err)
	}
	var schema *string
	var got bool
	err = conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema)
	if err == nil && schema == nil {
		err = errors.New("no current schema")
	}
	var key int64
	if err == nil {
		key = replicaLockKey(*schema, id)
		err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got)
	}
	if err == nil && !got {
		err = fmt.Errorf("replica_id %q is in use by another running toolserverd on this database: give each replica its own replica_id (TOOLSERVER_REPLICA_ID): %w", id, ErrConflict)
	}
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, 0, fmt.Errorf("store: claim replica_id: %w", err)
	}
	return conn, key, nil
}

// replicaLockKey is the advisory lock key of replica id in schema.
func replicaLockKey(schema, id string) int64 {
	h := fnv.New64a()
	h.Write([]byte("toolserverd.replica:" + schema + ":" + id))
	return int64(h.Sum64())
}
