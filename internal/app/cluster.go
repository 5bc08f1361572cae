package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolserverd/toolserverd/internal/builtin"
	"github.com/toolserverd/toolserverd/internal/chain"
	"github.com/toolserverd/toolserverd/internal/cluster"
	"github.com/toolserverd/toolserverd/internal/server"
	"github.com/toolserverd/toolserverd/internal/store"
)

// sessionLocks makes unsafe calls take a per-session advisory lock when replicas
// share PostgreSQL. With SQLite (one process) the in-process lock is all there is.
func (a *App) sessionLocks(ctx context.Context) error {
	if a.storeKind() != "postgres" {
		return nil
	}
	l, err := store.NewPGSessionLocks(ctx, a.Config.Store, a.Config.Cluster.SessionLockConnections, a.Config.ReplicaID)
	if err != nil {
		return err
	}
	a.sessionLockPool = l
	a.Exec.UseSessionLocks(l)
	return nil
}

// joinCluster starts heartbeating this replica (reachable at the address derived
// from ln) and failing the calls of replicas that stopped. It returns the stop
// function; nothing to do with SQLite. Close marks the replica gone (leaveCluster).
func (a *App) joinCluster(ctx context.Context, ln net.Listener) (stop func(), err error) {
	rs, ok := a.Store.(store.ReplicaStore)
	if a.storeKind() != "postgres" || !ok {
		return func() {}, nil
	}
	m, err := cluster.New(cluster.Config{ReplicaID: a.Config.ReplicaID, Address: advertiseURL(a.Config.Cluster.AdvertiseURL, ln.Addr()),
		Lease: a.Config.Cluster.Lease, Fence: a.Exec.CancelAll, Expired: a.expiredCalls(),
		Wrote: a.heartbeatWrote()}, rs, a.Notifier, a.Log)
	if err != nil {
		return nil, fmt.Errorf("config: cluster: %w", err)
	}
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	a.membership = m
	return m.Stop, nil
}

// heartbeatWrote is told of each heartbeat that committed: the database takes
// writes, so /readyz's store_writes passes again without waiting for a call record
// (a load balancer sends none to a replica that is not ready).
func (a *App) heartbeatWrote() func(time.Time) {
	if a.Commits == nil {
		return nil
	}
	return a.Commits.Wrote
}

// leaveCluster marks this replica gone once its records are written, so the others
// serve its finished calls from the store without waiting for its lease to run out.
func (a *App) leaveCluster() {
	if a.membership == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.membership.Leave(ctx); err != nil {
		a.Log.Error("marking this replica gone failed; the other replicas treat it as gone once its lease runs out",
			"lease", a.Config.Cluster.Lease.String(), "err", err)
	}
}

// advertiseURL is the configured URL, or http:// + the listen address with an
// unspecified host replaced by the host name.
func advertiseURL(configured string, addr net.Addr) string {
	if configured != "" {
		return configured
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// replicaForwarding lets this replica forward progress reads to the replica running
// the call; nil with SQLite.
func (a *App) replicaForwarding() *server.Replicas {
	rs, ok := a.Store.(store.ReplicaStore)
	if a.storeKind() != "postgres" || !ok {
		return nil
	}
	return &server.Replicas{Self: a.Config.ReplicaID, Lookup: rs, Lease: a.Config.Cluster.Lease, AnswerTimeout: a.Config.Cluster.AnswerTimeout}
}

// jobRelay lets the job tools reach background jobs that other replicas run; nil
// (every job is in this process) with SQLite.
func (a *App) jobRelay() builtin.JobDirectory {
	st, ok := a.Store.(cluster.JobStore)
	if a.storeKind() != "postgres" || !ok {
		return nil
	}
	return cluster.NewJobRelay(a.Config.ReplicaID, st, a.callRecords(), nil)
}

// artifactRelay lets artifact_read reach the tool_chain artifacts other replicas
// hold; nil (every artifact is in this process) with SQLite.
func (a *App) artifactRelay() chain.ArtifactDirectory {
	st, ok := a.Store.(cluster.ArtifactStore)
	if a.storeKind() != "postgres" || !ok {
		return nil
	}
	return cluster.NewArtifactRelay(a.Config.ReplicaID, st, a.callRecords(), nil)
}

// fileStamps is where sessions' file tools keep what they have seen: with PostgreSQL
// every stamp, shared between the replicas so that a file read through one may be
// written through another; with SQLite, whose one process holds the rest in memory,
// only the stamps calls waiting for approval depend on, so that they can run after a
// restart (builtin.Stamps).
func (a *App) fileStamps() builtin.Stamps {
	st, ok := a.Store.(store.FileStampStore)
	if !ok {
		return builtin.Stamps{}
	}
	return builtin.Stamps{Store: st, Replicated: a.storeKind() == "postgres", Log: a.Log}
}

// callRecords commits a call's record before a relay forwards the call; nil when
// records are not group-committed.
func (a *App) callRecords() cluster.CallRecords {
	if a.Commits == nil {
		return nil
	}
	return a.Commits
}

// expiredCalls counts, in toolserverd_replica_expired_calls_total, the calls of
// stopped replicas this replica's sweep marked failed: their own replica, killed,
// never counts them in toolserverd_tool_calls_total. The stopped replica is not a
// label: on Kubernetes every pod has a new name, and a series per dead pod would grow
// /metrics for ever; the sweep's log line names it (replica_id).
func (a *App) expiredCalls() func(owner string, calls int) {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolserverd_replica_expired_calls_total",
		Help: "Unfinished calls of replicas that stopped heartbeating, marked failed by this replica (the log names each stopped replica).",
	})
	a.Registry.MustRegister(c)
	return func(_ string, calls int) { c.Add(float64(calls)) }
}
