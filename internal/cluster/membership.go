// Package cluster keeps a replica's membership among the daemons sharing one
// PostgreSQL database: it heartbeats this replica's row and, as a survivor, fails the
// unfinished calls of replicas whose lease ran out, so that a killed replica's calls
// are never left running forever.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// Store is what membership needs of the store.
type Store interface {
	Heartbeat(ctx context.Context, id, address string, startedAt time.Time) error
	ExpireReplicas(ctx context.Context, self string, lease time.Duration, result func(owner string, started bool) *tool.Result) ([]store.ExpiredCall, error)
	LeaveReplica(ctx context.Context, id string) error
}

// Notifier wakes the waiters of a call that was failed.
type Notifier interface {
	Notify(ctx context.Context, topic, payload string) error
}

// Config describes this replica.
type Config struct {
	ReplicaID string
	// Address is this replica's advertised base URL.
	Address string
	// Lease is how long a replica may go without a heartbeat before the others fail
	// its unfinished calls.
	Lease time.Duration
	// Interval is how often to heartbeat and sweep; 0 means Lease/3.
	Interval time.Duration
	// Fence is called at every heartbeat tick once this replica's heartbeats have
	// failed for longer than the lease: by then the other replicas fail its unfinished
	// calls, so it must stop running them. It cancels the running calls and returns
	// how many it cancelled. Nil: nothing is fenced.
	Fence func() int
	// Expired, when set, is told how many unfinished calls of a stopped replica a
	// sweep marked failed (for a metric: those calls' own replica never counts them).
	Expired func(owner string, calls int)
	// Wrote, when set, is told of each heartbeat that committed, with when it was
	// sent: the store takes writes (a readiness check that failed on refused writes
	// can pass again without waiting for other traffic).
	Wrote func(sent time.Time)
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.ReplicaID == "":
		return errors.New("cluster: replica id is empty")
	case c.Lease <= 0:
		return fmt.Errorf("cluster: lease %s is not positive", c.Lease)
	case c.Interval < 0 || (c.Interval > 0 && c.Interval >= c.Lease):
		return fmt.Errorf("cluster: heartbeat interval %s must be shorter than the lease %s", c.Interval, c.Lease)
	}
	return nil
}

// Membership heartbeats and sweeps. Start it once; Stop it once.
type Membership struct {
	cfg     Config
	st      Store
	notify  Notifier
	log     *slog.Logger
	started time.Time

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	// lastOK is when the last heartbeat that committed was sent (nil before Start).
	lastOK atomic.Pointer[time.Time]
}

// New returns a Membership; notify may be nil.
func New(cfg Config, st Store, notify Notifier, log *slog.Logger) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval == 0 {
		cfg.Interval = cfg.Lease / 3
	}
	return &Membership{cfg: cfg, st: st, notify: notify, log: log}, nil
}

// ExpiredReason is the text of the result given to a call whose replica stopped.
func ExpiredReason(owner string) string {
	return fmt.Sprintf("replica %s stopped answering while this call ran; the call may have run partly", owner)
}

// Start writes the first heartbeat (an unreachable store fails the start), then
// heartbeats and sweeps every interval until Stop.
func (m *Membership) Start(ctx context.Context) error {
	m.started = time.Now().UTC()
	if err := m.st.Heartbeat(ctx, m.cfg.ReplicaID, m.cfg.Address, m.started); err != nil {
		return fmt.Errorf("cluster: first heartbeat: %w", err)
	}
	sent := time.Now()
	m.lastOK.Store(&sent)
	ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	m.done = make(chan struct{})
	go m.loop(ctx)
	return nil
}

func (m *Membership) loop(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	// lastOK is when the last heartbeat that succeeded was sent, by this process's
	// monotonic clock. The row's last_seen is no earlier, so this replica fences
	// itself no later than the others may start failing its calls (give or take one
	// interval, which the store's conditional finish covers: a late result never
	// replaces the survivors' failed record).
	lastOK := time.Now()
	fenced := false
	failed := false // a heartbeat failed since lastOK
	m.Sweep(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Each store operation gets at most one interval, so a hung database cannot
		// make the heartbeat fall further behind than it must.
		sent := time.Now()
		hctx, cancel := context.WithTimeout(ctx, m.cfg.Interval)
		err := m.st.Heartbeat(hctx, m.cfg.ReplicaID, m.cfg.Address, m.started)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if fenced {
				m.log.Warn("replica heartbeat works again; this replica runs calls again", "replica_id", m.cfg.ReplicaID)
				fenced = false
			} else if since := sent.Sub(lastOK); since > m.cfg.Lease && m.cfg.Fence != nil {
				// None got through for longer than the lease: heartbeats failed (the
				// database away for a moment, each failure still within the lease), or
				// none was sent, the process being stopped (SIGSTOP, a frozen VM) or
				// starved. The others may have failed its calls meanwhile and closed its
				// session locks, so the calls it was running must stop, as when fenced.
				n := m.cfg.Fence()
				why := "sent no heartbeat for longer than its lease (the process was stopped or starved)"
				if failed {
					why = "has not heartbeated for longer than its lease (its heartbeats failed until now)"
				}
				m.log.Error("FENCED: this replica "+why+"; the other replicas failed its calls, so it cancelled the calls it was running",
					"replica_id", m.cfg.ReplicaID, "lease", m.cfg.Lease.String(),
					"since_last_heartbeat", since.Round(time.Millisecond).String(), "cancelled_calls", n)
			}
			lastOK, failed = sent, false
			m.lastOK.Store(&sent)
			if m.cfg.Wrote != nil {
				m.cfg.Wrote(sent)
			}
		default:
			failed = true
			m.log.Error("replica heartbeat failed; if it keeps failing for the lease, other replicas fail this replica's calls",
				"replica_id", m.cfg.ReplicaID, "lease", m.cfg.Lease.String(), "err", err)
			if since := time.Since(lastOK); since > m.cfg.Lease && m.cfg.Fence != nil {
				if n := m.cfg.Fence(); n > 0 || !fenced {
					m.log.Error("FENCED: this replica has not heartbeated for longer than its lease; the other replicas fail its calls, "+
						"so it cancelled the calls it was running", "replica_id", m.cfg.ReplicaID, "lease", m.cfg.Lease.String(),
						"since_last_heartbeat", since.Round(time.Millisecond).String(), "cancelled_calls", n)
				}
				fenced = true
			}
		}
		m.Sweep(ctx)
	}
}

// Current is nil while this replica's lease holds: a heartbeat of it committed less
// than the lease ago. Past that the other replicas fail the calls it holds, and also
// those it starts before its next heartbeat commits (after a database outage longer
// than the lease, their sweep may come first), so it should get no calls: /readyz
// fails on it (check replica_lease) until a heartbeat goes through again.
func (m *Membership) Current() error {
	p := m.lastOK.Load()
	if p == nil {
		return nil
	}
	if since := time.Since(*p); since > m.cfg.Lease {
		return fmt.Errorf("this replica's last heartbeat went through %s ago, more than its lease (%s): the other replicas fail the calls it runs or starts until one goes through again",
			since.Round(100*time.Millisecond), m.cfg.Lease)
	}
	return nil
}

// Sweep fails the calls of replicas whose lease ran out and wakes their waiters. It
// returns how many calls it failed.
func (m *Membership) Sweep(ctx context.Context) int {
	sctx, cancel := context.WithTimeout(ctx, m.cfg.Interval)
	defer cancel()
	expired, err := m.st.ExpireReplicas(sctx, m.cfg.ReplicaID, m.cfg.Lease, func(owner string, started bool) *tool.Result {
		if !started {
			return tool.ErrorResult(tool.KindFailed, "replica %s stopped answering before this call started; it was not run", owner)
		}
		return tool.ErrorResult(tool.KindFailed, "%s", ExpiredReason(owner))
	})
	if err != nil && ctx.Err() == nil {
		m.log.Error("failing the calls of stopped replicas failed", "err", err)
	}
	owners := map[string]int{}
	for _, c := range expired {
		owners[c.Owner]++
		if m.notify != nil {
			_ = m.notify.Notify(ctx, store.TopicCall, c.ID)
		}
	}
	for owner, n := range owners {
		if m.cfg.Expired != nil {
			m.cfg.Expired(owner, n)
		}
		m.log.Warn("a replica stopped heartbeating; its unfinished calls were marked failed",
			"replica_id", owner, "calls", n, "lease", m.cfg.Lease.String())
	}
	return len(expired)
}

// Stop ends heartbeats and sweeps. The row stays: if calls were left unfinished, the
// survivors fail them once the lease runs out. A replica that stops cleanly then
// calls Leave.
func (m *Membership) Stop() {
	m.once.Do(func() {
		if m.cancel != nil {
			m.cancel()
			<-m.done
		}
	})
}

// Leave stops heartbeats and sweeps and marks this replica gone, as if its lease had
// run out long ago: the other replicas serve its finished calls' reads from the record
// at once (rather than answering "owner unreachable" until the lease ends) and their
// next sweep fails whatever it left unfinished, as for a killed replica. Call it on a
// clean stop, after the drain and once every record this replica holds is written: a
// result written after the survivors' sweep never replaces the failed record.
func (m *Membership) Leave(ctx context.Context) error {
	m.Stop()
	if err := m.st.LeaveReplica(ctx, m.cfg.ReplicaID); err != nil {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	m.log.Info("left the cluster: the other replicas serve this replica's finished calls from the store", "replica_id", m.cfg.ReplicaID)
	return nil
}
