package session

import (
	"context"
	"log/slog"
	"sync"

	"golang.org/x/time/rate"
)

// Bounds of the error lines logged for calls whose records the store refused.
const (
	storeErrLogsPerSec = 1
	storeErrLogBurst   = 10
)

// storeErrLog bounds the error lines of calls whose records the store refused. While
// the database is away every call fails the same way, and a line for each would
// flood the log at the request rate: at most storeErrLogBurst lines at once, then one
// a second; the next line logged says how many were not (unlogged_before). The calls
// themselves are each answered, and counted in the metrics, as before.
type storeErrLog struct {
	mu       sync.Mutex
	lim      *rate.Limiter
	unlogged int
}

func (l *storeErrLog) log(ctx context.Context, log *slog.Logger, msg string, args ...any) {
	l.mu.Lock()
	if l.lim == nil {
		l.lim = rate.NewLimiter(storeErrLogsPerSec, storeErrLogBurst)
	}
	if !l.lim.Allow() {
		l.unlogged++
		l.mu.Unlock()
		return
	}
	if l.unlogged > 0 {
		args = append(args, "unlogged_before", l.unlogged)
		l.unlogged = 0
	}
	l.mu.Unlock()
	log.ErrorContext(ctx, msg, args...)
}
