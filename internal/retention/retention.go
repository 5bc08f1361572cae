// Package retention deletes, in the background, what the daemon no longer needs to
// keep: call records finished longer ago than retention.calls and sessions unused for
// retention.sessions (config). Without it the store and the workspace directory grow
// for as long as the daemon runs.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolserverd/toolserverd/internal/store"
)

// CallStore deletes finished call records (store.Retention).
type CallStore interface {
	DeleteFinishedCalls(ctx context.Context, before time.Time, from string, limit int) (deleted int, stopped string, err error)
}

// Sessions deletes unused sessions (session.Manager).
type Sessions interface {
	DeleteUnused(ctx context.Context, now time.Time) (sessions, calls int, err error)
}

// Config says how long things are kept; 0 keeps them forever.
type Config struct {
	// Calls: a finished call's record goes this long after it finished.
	Calls time.Duration
	// Sessions: a session goes when nothing used it for this long. The session
	// manager knows the duration (UseRetention); here it only turns the sweep on.
	Sessions time.Duration
}

// Validate refuses negative durations.
func (c Config) Validate() error {
	if c.Calls < 0 || c.Sessions < 0 {
		return fmt.Errorf("retention: durations must not be negative (calls %s, sessions %s)", c.Calls, c.Sessions)
	}
	return nil
}

// Sweeper runs the deletions every so often.
type Sweeper struct {
	cfg      Config
	calls    CallStore
	sessions Sessions
	log      *slog.Logger
	deleted  *prometheus.CounterVec

	mu   sync.Mutex
	stop context.CancelFunc
	done chan struct{}
}

// New returns a sweeper; its counter toolserverd_retention_deleted_total{kind} is
// registered in reg. sessions may be nil when cfg.Sessions is 0.
func New(cfg Config, calls CallStore, sessions Sessions, reg prometheus.Registerer, log *slog.Logger) (*Sweeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Sessions > 0 && sessions == nil {
		return nil, errors.New("retention: sessions retention needs the session manager")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sweeper{cfg: cfg, calls: calls, sessions: sessions, log: log,
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolserverd_retention_deleted_total",
			Help: "Records deleted by retention: kind calls (call records, with a session or on their own; config retention.calls) and sessions (retention.sessions).",
		}, []string{"kind"})}
	// Both series exist from the start, at 0.
	s.deleted.WithLabelValues("calls")
	s.deleted.WithLabelValues("sessions")
	if reg != nil {
		if err := reg.Register(s.deleted); err != nil {
			return nil, fmt.Errorf("retention: metrics: %w", err)
		}
	}
	return s, nil
}

// interval: half the shortest retention, so a record outlives it by at most half of
// it, at least a second, at most every 10 minutes (as chain.artifact_retention).
func (s *Sweeper) interval() time.Duration {
	shortest := s.cfg.Calls
	if shortest == 0 || (s.cfg.Sessions > 0 && s.cfg.Sessions < shortest) {
		shortest = s.cfg.Sessions
	}
	return min(max(shortest/2, time.Second), 10*time.Minute)
}

// Start sweeps every interval until ctx ends or Stop is called. With nothing to
// delete (both retentions 0) no sweeper runs.
func (s *Sweeper) Start(ctx context.Context) error {
	if s.cfg.Calls == 0 && s.cfg.Sessions == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return errors.New("retention: sweeper already started")
	}
	ctx, s.stop = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func(done chan<- struct{}) {
		defer close(done)
		t := time.NewTicker(s.interval())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				calls, sessions, err := s.Sweep(ctx, now)
				if err != nil && ctx.Err() == nil {
					s.log.Warn("retention: deleting old records", "err", err)
				}
				if calls > 0 || sessions > 0 {
					s.log.Info("retention: old records deleted", "calls", calls, "sessions", sessions)
				}
			}
		}
	}(s.done)
	return nil
}

// Stop ends the sweeper and waits for it (a batch under way is cancelled). It is
// idempotent.
func (s *Sweeper) Stop() {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// Sweep deletes the call records finished before now minus retention.calls, a batch
// per transaction, then the unused sessions. It returns how many calls (those of the
// deleted sessions included) and sessions it deleted.
func (s *Sweeper) Sweep(ctx context.Context, now time.Time) (calls, sessions int, err error) {
	var errs []error
	if s.cfg.Calls > 0 {
		cutoff := now.Add(-s.cfg.Calls).UTC()
		// Each batch goes on from the tenant where the one before stopped.
		from := ""
		for ctx.Err() == nil {
			n, stopped, err := s.calls.DeleteFinishedCalls(ctx, cutoff, from, store.RetentionBatch)
			calls += n
			s.deleted.WithLabelValues("calls").Add(float64(n))
			if err != nil {
				errs = append(errs, err)
				break
			}
			if n < store.RetentionBatch {
				break
			}
			from = stopped
		}
	}
	if s.cfg.Sessions > 0 && ctx.Err() == nil {
		n, c, err := s.sessions.DeleteUnused(ctx, now)
		sessions, calls = n, calls+c
		s.deleted.WithLabelValues("sessions").Add(float64(n))
		s.deleted.WithLabelValues("calls").Add(float64(c))
		errs = append(errs, err)
	}
	return calls, sessions, errors.Join(errs...)
}
