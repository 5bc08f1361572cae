package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// Delays between attempts to reach the store at start: the first retry comes soon
// (a database that is just starting), later ones every few seconds.
const (
	storeFirstRetry = 250 * time.Millisecond
	storeMaxRetry   = 5 * time.Second
	// storeAttemptTimeout bounds one attempt's connection, so that a server that
	// never answers (a lost route) costs an attempt, not the whole wait.
	storeAttemptTimeout = 10 * time.Second
)

// ErrStopped: the daemon was told to stop (its context ended: SIGTERM, SIGINT) while
// it waited for its store, and did not start. It is a clean stop, not a failure.
var ErrStopped = errors.New("stopped while waiting for the store")

// openStore opens the store and migrates it. A PostgreSQL that cannot be reached
// (nothing listening, no such host, starting up) is tried again with doubling delays
// for up to wait, each attempt logged; any other failure (a wrong password, a missing
// database, a failed migration, an invalid URL) returns at once, as does the end of
// ctx (SIGTERM). wait 0 tries once.
func openStore(ctx context.Context, c store.Config, wait time.Duration, log *slog.Logger) (store.Store, error) {
	if wait <= 0 {
		return store.Open(ctx, c)
	}
	start := time.Now()
	deadline := start.Add(wait)
	delay := storeFirstRetry
	for attempt := 1; ; attempt++ {
		c.ConnectTimeout = min(storeAttemptTimeout, max(time.Until(deadline), time.Second))
		s, err := store.Open(ctx, c)
		if err == nil {
			if attempt > 1 {
				log.Info("store reachable", "attempt", attempt, "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (attempt %d, after %s): %w", ErrStopped, attempt, time.Since(start).Round(time.Millisecond), err)
		}
		if !store.IsUnreachable(err) {
			return nil, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("%w; gave up after %d attempts in %s (store_connect_timeout %s)",
				err, attempt, time.Since(start).Round(time.Millisecond), wait)
		}
		next := min(delay, left)
		log.Warn("store unreachable; trying again", "attempt", attempt, "err", err,
			"retry_in", next.String(), "gives_up_in", left.Round(time.Millisecond).String())
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (attempt %d, after %s): %w", ErrStopped, attempt, time.Since(start).Round(time.Millisecond), err)
		case <-t.C:
		}
		delay = min(2*delay, storeMaxRetry)
	}
}
