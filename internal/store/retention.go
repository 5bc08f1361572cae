package store

import (
	"context"
	"time"
)

// Retention: how the store forgets what is old (config retention.calls and
// retention.sessions). Both stores implement it; the conformance suite checks it.
//
// A finished call record (CallStatus.Terminal) goes once its finished_at is older than
// the cutoff, with its approvals (decided or expired: an approval is a copy of its
// call's request, arguments included, and would otherwise be listed pointing at a call
// that no longer exists). A call with a pending approval stays, and so does one whose
// output is still open (Call.OutputOpen: a background job it started runs on, and its
// output is read and followed through the call's record). The audit log is never
// touched: it is the lasting record of who decided what, and holds no arguments.
//
// A session goes once it is unused at the cutoff (no unfinished or recent call, no
// call with its output open, no pending approval: DeleteUnusedSession), with every record
// that belongs to it only: its call records and their approvals, its tasks and its
// scratchpad, and (PostgreSQL: SQLite never records jobs or artifacts) the rows
// naming the replicas that ran its background jobs and hold its tool_chain artifacts. Memories are the tenant's and stay. Its
// directories (workspace, artifacts) are the session manager's business.

// RetentionBatch is how many call records one retention transaction deletes at most
// when the caller gives no limit: a first sweep over millions of rows is many short
// transactions, never one that holds the writer (SQLite) or a long lock.
const RetentionBatch = 1000

// Retention is the part of Store that forgets.
type Retention interface {
	// DeleteFinishedCalls deletes at most limit (<= 0: RetentionBatch) call records
	// that finished before before, and their approvals: tenant by tenant in order,
	// from the tenant from on ("": the first), the oldest created first. A call that
	// is not terminal, has a pending approval or its output still open, stays. It returns how many calls it
	// deleted and, when that is limit, the tenant it stopped in: a sweep passes it as
	// from to its next batch, which goes on there rather than probing again every
	// tenant before it. Fewer than limit means no more are due from from on (or
	// another sweep took some of them).
	// A call finishes after it was created, so the due ones are among those created
	// before the cutoff: a range of tool_calls_tenant_created_idx, which every record
	// pays for already (an index on finished_at would cost each one more).
	DeleteFinishedCalls(ctx context.Context, before time.Time, from string, limit int) (deleted int, stopped string, err error)
	// UnusedSessions returns at most limit (<= 0: RetentionBatch) sessions whose
	// updated_at is before before, ordered by (updated_at, id) and after the cursor
	// after (the last session of the previous page; nil: from the start). It is a
	// list of candidates: DeleteUnusedSession decides.
	UnusedSessions(ctx context.Context, before time.Time, after *Session, limit int) ([]*Session, error)
	// TouchSession records a use of the session at at: its updated_at becomes at,
	// unless it is later already. Unknown session: ErrNotFound (another process
	// deleted it).
	TouchSession(ctx context.Context, id string, at time.Time) error
	// ExistingSessions returns those of ids (at most RetentionBatch) that are stored
	// sessions, in no order. The sweep asks it about the directories it finds for
	// sessions, to remove those left of deleted ones.
	ExistingSessions(ctx context.Context, ids []string) ([]string, error)
	// DeleteUnusedSession deletes session id with its call records, their approvals,
	// its tasks, scratchpad and job rows, if the session is unused at before: its updated_at is
	// before it, none of its calls is unfinished, has its output open (a background
	// job runs on), was created or finished at or after it, and none of its approvals
	// is pending. Unknown session: ErrNotFound; in use:
	// ErrConflict. One transaction deletes at most limit (<= 0: RetentionBatch) call
	// records; a session with more loses that many and gone is false: call again
	// (each call checks again that the session is unused). gone is true once the
	// session itself is deleted. The check and the delete are one transaction under
	// the session row's lock (PostgreSQL) or the writer's (SQLite), so replicas
	// sweeping at once delete a session once, and a TouchSession that committed
	// first keeps it.
	DeleteUnusedSession(ctx context.Context, id string, before time.Time, limit int) (calls int, gone bool, err error)
	// DeleteSession is DeleteUnusedSession for a client's own delete (DELETE
	// /v1/sessions/{id}): a call whose output is open (a background job running)
	// does not keep the session, whose deletion ends the job.
	DeleteSession(ctx context.Context, id string, before time.Time, limit int) (calls int, gone bool, err error)
}

var (
	_ Retention = (*SQLite)(nil)
	_ Retention = (*Postgres)(nil)
)

// retentionNextTenant is the first tenant after (op ">") or from (op ">=") the one
// given (placeholder ph) that has call records, NULL when none: one probe of
// tool_calls_tenant_created_idx. DeleteFinishedCalls steps through the tenants with
// it, as far as its batch needs and no farther.
func retentionNextTenant(op, ph string) string {
	return `SELECT MIN(tenant) FROM tool_calls WHERE tenant ` + op + ` ` + ph
}

// terminalStatuses is CallStatus.Terminal in SQL.
const terminalStatuses = `('succeeded', 'failed')`

// sessionUnusedCond is DeleteUnusedSession's test in either dialect, for the session
// aliased s, given the placeholder of the cutoff (used three times: pass it three
// times in SQLite). With openOutputKeeps (retention), a call whose output is open
// counts as unfinished: its background job runs on, and deleting the session would
// end it; a client's own delete ends it on purpose.
func sessionUnusedCond(c1, c2, c3 string, openOutputKeeps bool) string {
	open := ""
	if openOutputKeeps {
		open = ` OR c.output_open`
	}
	return `s.updated_at < ` + c1 + `
		AND NOT EXISTS (SELECT 1 FROM tool_calls c WHERE c.session_id = s.id
			AND (c.status NOT IN ` + terminalStatuses + open + ` OR c.created_at >= ` + c2 + ` OR c.finished_at >= ` + c3 + `))
		AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.session_id = s.id AND a.status = 'pending')`
}

func retentionLimit(limit int) int {
	if limit <= 0 {
		return RetentionBatch
	}
	return limit
}
