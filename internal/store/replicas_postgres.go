package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/tool"
)

var _ ReplicaStore = (*Postgres)(nil)

// replicaRetention is how long the row of a replica that stopped, and owns no
// unfinished call, is kept (pods get new names on every rollout).
const replicaRetention = 24 * time.Hour

func (p *Postgres) Heartbeat(ctx context.Context, id, address string, startedAt time.Time) error {
	if id == "" {
		return fmt.Errorf("store: heartbeat: empty replica id: %w", ErrInvalid)
	}
	if startedAt.IsZero() {
		startedAt = now()
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO replicas (id, address, started_at, last_seen) VALUES ($1, $2, $3, now())
		ON CONFLICT (id) DO UPDATE SET address = EXCLUDED.address, last_seen = now()`, id, address, utcMicro(startedAt))
	if err != nil {
		return fmt.Errorf("store: heartbeat of %s: %w", id, err)
	}
	return nil
}

func (p *Postgres) GetReplica(ctx context.Context, id string) (*Replica, error) {
	var r Replica
	var silentUS int64
	err := p.pool.QueryRow(ctx, `SELECT id, address, started_at, last_seen,
		GREATEST(0, (EXTRACT(EPOCH FROM now() - last_seen) * 1000000)::bigint) FROM replicas WHERE id = $1`, id).
		Scan(&r.ID, &r.Address, &r.StartedAt, &r.LastSeen, &silentUS)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: get replica %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get replica %s: %w", id, err)
	}
	r.StartedAt, r.LastSeen = r.StartedAt.UTC(), r.LastSeen.UTC()
	r.Silent = time.Duration(silentUS) * time.Microsecond
	return &r, nil
}

// LeaveReplica sets last_seen to the epoch rather than deleting the row: the
// sweep (ExpireReplicas) finds the calls of stale replicas through their rows, and
// deletes the row itself once none is left unfinished.
func (p *Postgres) LeaveReplica(ctx context.Context, id string) error {
	tag, err := p.pool.Exec(ctx, `UPDATE replicas SET last_seen = 'epoch' WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("store: leave replica %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: leave replica %s: %w", id, ErrNotFound)
	}
	return nil
}

// pgStaleReplicas finds replicas past their lease that still own unfinished calls;
// tool_calls_owner_active_idx answers the EXISTS.
const pgStaleReplicas = `SELECT id FROM replicas r WHERE id <> $1 AND last_seen < now() - $2 * interval '1 microsecond'
	AND (EXISTS (SELECT 1 FROM tool_calls c WHERE c.owner = r.id AND c.status IN ('pending', 'running'))
		OR EXISTS (SELECT 1 FROM tool_calls c WHERE c.owner = r.id AND c.output_open))`

func (p *Postgres) ExpireReplicas(ctx context.Context, self string, lease time.Duration, result func(owner string, started bool) *tool.Result) ([]ExpiredCall, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("store: expire replicas: lease %s is not positive: %w", lease, ErrInvalid)
	}
	leaseUS := lease.Microseconds()
	rows, err := p.pool.Query(ctx, pgStaleReplicas, self, leaseUS)
	if err != nil {
		return nil, fmt.Errorf("store: expire replicas: %w", err)
	}
	stale, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: expire replicas: %w", err)
	}
	var out []ExpiredCall
	var lockErrs error
	for _, owner := range stale {
		res, notRun := result(owner, true), result(owner, false)
		var enc, encNotRun []byte
		for _, r := range []struct {
			res *tool.Result
			enc *[]byte
		}{{res, &enc}, {notRun, &encNotRun}} {
			if err := checkResult(r.res); err != nil {
				return out, fmt.Errorf("store: expire calls of %s: %w", owner, err)
			}
			if *r.enc, err = encodeResult(r.res); err != nil {
				return out, fmt.Errorf("store: expire calls of %s: encode result: %w", owner, err)
			}
		}
		// The staleness is checked again in the update: the replica may have come back
		// since the select. Concurrent sweeps serialize on the rows; the loser's
		// re-checked status condition no longer matches.
		// The CASEs read the status before the update: a pending call never ran.
		rows, err := p.pool.Query(ctx, `UPDATE tool_calls SET status = 'failed',
			result = CASE status WHEN 'pending' THEN $6::json ELSE $1::json END,
			error_kind = CASE status WHEN 'pending' THEN $7 ELSE $2 END, finished_at = $3
			WHERE owner = $4 AND status IN ('pending', 'running')
			AND EXISTS (SELECT 1 FROM replicas WHERE id = $4 AND last_seen < now() - $5 * interval '1 microsecond')
			RETURNING id`, enc, string(resultErrorKind(res)), now(), owner, leaseUS, encNotRun, string(resultErrorKind(notRun)))
		if err != nil {
			return out, fmt.Errorf("store: expire calls of %s: %w", owner, err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return out, fmt.Errorf("store: expire calls of %s: %w", owner, err)
		}
		for _, id := range ids {
			out = append(out, ExpiredCall{ID: id, Owner: owner})
		}
		// Its background jobs died with it: their calls' output is over.
		if _, err := p.pool.Exec(ctx, `UPDATE tool_calls SET output_open = FALSE WHERE owner = $1 AND output_open
			AND EXISTS (SELECT 1 FROM replicas WHERE id = $1 AND last_seen < now() - $2 * interval '1 microsecond')`,
			owner, leaseUS); err != nil {
			return out, fmt.Errorf("store: close the output of calls of %s: %w", owner, err)
		}
		// Its session locks: advisory locks die with their connections, which
		// PostgreSQL keeps for a process that stopped answering without closing them
		// (frozen, its node lost) until TCP keepalive gives up, two hours by default,
		// while its sessions' next unsafe calls wait. Its lock connections are closed
		// once its calls are failed and its jobs' output closed. Only connections opened before its lease ran out
		// from its last heartbeat: a process that took its id since opened its own
		// after that.
		if _, err := p.pool.Exec(ctx, `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a, replicas r
			WHERE r.id = $1 AND r.last_seen < now() - $2 * interval '1 microsecond'
			AND a.datname = current_database() AND a.pid <> pg_backend_pid()
			AND a.application_name = `+lockConnName+`
			AND a.backend_start < r.last_seen + $2 * interval '1 microsecond'`, owner, leaseUS); err != nil {
			// Not a reason to leave the rest undone: PostgreSQL refuses to end
			// another role's connections (replicas connecting as different users).
			lockErrs = errors.Join(lockErrs, fmt.Errorf("store: close the session locks of %s: %w", owner, err))
		}
	}
	// A replica whose row is gone (an older release's sweep forgot it while its call's
	// output was open) ran no job since: its calls' output is over too.
	if _, err := p.pool.Exec(ctx, `UPDATE tool_calls c SET output_open = FALSE WHERE output_open AND owner <> ''
		AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = c.owner)`); err != nil {
		return out, errors.Join(lockErrs, fmt.Errorf("store: close the output of calls of forgotten replicas: %w", err))
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM replicas r WHERE last_seen < now() - $1 * interval '1 microsecond'
		AND NOT EXISTS (SELECT 1 FROM tool_calls c WHERE c.owner = r.id AND c.status IN ('pending', 'running'))
		AND NOT EXISTS (SELECT 1 FROM tool_calls c WHERE c.owner = r.id AND c.output_open)`,
		replicaRetention.Microseconds()); err != nil {
		return out, errors.Join(lockErrs, fmt.Errorf("store: forget old replicas: %w", err))
	}
	return out, lockErrs
}
