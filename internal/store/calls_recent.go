package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// CallFilter selects calls across sessions (for consoles: what runs now, what ran).
type CallFilter struct {
	// Tenant is required: a listing never crosses tenants.
	Tenant string
	// Statuses keeps calls in any of these states; empty keeps all.
	Statuses []CallStatus
	// Live keeps only the calls that are live: pending, running or waiting, or
	// finished with their output still open (Call.OutputOpen). With Statuses, a call
	// must be both.
	Live bool
	// Limit caps the answer; <= 0 means 100.
	Limit int
	// Before pages backwards: only calls ordered after (Before, BeforeID) in the
	// listing's order (created_at, then id, descending), such as the last call of the
	// previous page. Zero Before: from the newest.
	Before   time.Time
	BeforeID string
	// MaxBytes bounds what the listing reads (see ListBytes); <= 0 means ListBytes.
	MaxBytes int
}

func (f CallFilter) limit() int {
	if f.Limit <= 0 {
		return 100
	}
	return f.Limit
}

// activeOnly reports whether the filter keeps only live calls (those that have not
// finished, or whose output is open), which the partial index
// tool_calls_tenant_active_idx answers. A planner uses a partial index only when the
// query repeats its condition, so such queries carry activeCondition as well as their
// own filter.
func (f CallFilter) activeOnly() bool {
	if f.Live {
		return true
	}
	if len(f.Statuses) == 0 {
		return false
	}
	for _, st := range f.Statuses {
		if st != CallPending && st != CallRunning && st != CallWaiting {
			return false
		}
	}
	return true
}

// activeCondition is the WHERE of tool_calls_tenant_active_idx (migration 0013), verbatim.
const activeCondition = ` AND (status IN ('pending', 'running', 'waiting') OR output_open)`

func (f CallFilter) statuses() []string {
	out := make([]string, len(f.Statuses))
	for i, s := range f.Statuses {
		out[i] = string(s)
	}
	return out
}

func sqliteRecentCallsQuery(f CallFilter) (string, []any) {
	q := `SELECT ` + sqliteCallColumns + ` FROM tool_calls WHERE tenant = ?`
	args := []any{f.Tenant}
	if f.activeOnly() {
		q += activeCondition
	}
	if st := f.statuses(); len(st) > 0 {
		q += ` AND status IN (?` + strings.Repeat(`, ?`, len(st)-1) + `)`
		for _, v := range st {
			args = append(args, v)
		}
	}
	if !f.Before.IsZero() {
		// A row value, so that the index answers it as a range (an OR of the two
		// conditions would walk every newer row of the tenant first).
		q += ` AND (created_at, id) < (?, ?)`
		args = append(args, sqliteTime(f.Before), f.BeforeID)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	return q, append(args, f.limit())
}

// ListRecentCalls returns the tenant's calls in any session, newest first (ties: id
// descending), at most f.Limit.
func (s *SQLite) ListRecentCalls(ctx context.Context, f CallFilter) ([]*Call, error) {
	q, args := sqliteRecentCallsQuery(f)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list recent calls: %w", err)
	}
	defer rows.Close()
	calls, err := collectCalls(rows, f.MaxBytes, func() (*Call, error) { return scanSQLiteCall(rows) })
	if err != nil {
		return nil, fmt.Errorf("store: list recent calls: %w", err)
	}
	return calls, nil
}

// ListRecentCalls returns the tenant's calls in any session, newest first (ties: id
// descending), at most f.Limit.
func (p *Postgres) ListRecentCalls(ctx context.Context, f CallFilter) ([]*Call, error) {
	q, args := pgRecentCallsQuery(f)
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list recent calls: %w", err)
	}
	defer rows.Close()
	calls, err := collectCalls(rows, f.MaxBytes, func() (*Call, error) { return scanPGCall(rows) })
	if err != nil {
		return nil, fmt.Errorf("store: list recent calls: %w", err)
	}
	return calls, nil
}

func pgRecentCallsQuery(f CallFilter) (string, []any) {
	var statuses []string // NULL: every status
	if st := f.statuses(); len(st) > 0 {
		statuses = st
	}
	cond := ""
	if f.activeOnly() {
		cond = activeCondition
	}
	args := []any{f.Tenant, statuses, f.limit()}
	if !f.Before.IsZero() {
		cond += ` AND (created_at, id) < ($4, $5)`
		args = append(args, utcMicro(f.Before), f.BeforeID)
	}
	return `SELECT ` + pgCallColumns + ` FROM tool_calls WHERE tenant = $1` + cond + ` AND ($2::text[] IS NULL OR status = ANY($2))
		ORDER BY created_at DESC, id DESC LIMIT $3`, args
}

// ListBytes bounds what one listing of calls reads unless the listing says otherwise
// (CallFilter.MaxBytes, CallPage.MaxBytes; the daemon's max_list_bytes): rows are
// taken in order until their arguments and results pass it (the row that passes it
// included), so that a listing of records holding megabytes each cannot take
// gigabytes. ListCut tells a listing that stopped there.
const ListBytes = 32 << 20

// listBytes is max, or ListBytes when max <= 0.
func listBytes(max int) int {
	if max <= 0 {
		return ListBytes
	}
	return max
}

// Size is what the call's arguments and result hold, in bytes.
func (c *Call) Size() int {
	n := len(c.Arguments)
	if r := c.Result; r != nil {
		n += len(r.Structured) + len(r.Details)
		for _, b := range r.Content {
			n += len(b.Text) + len(b.Data)
		}
	}
	return n
}

// ListCut reports whether a listing read with MaxBytes max (<= 0: ListBytes) stopped
// there (there may be more).
func ListCut(calls []*Call, max int) bool {
	n := 0
	for _, c := range calls {
		n += c.Size()
	}
	return n >= listBytes(max)
}

// collectCalls reads the rows of rows (*sql.Rows or pgx.Rows) with scan, up to max
// bytes (<= 0: ListBytes); no rows is an empty slice, not nil.
func collectCalls(rows interface {
	Next() bool
	Err() error
}, max int, scan func() (*Call, error)) ([]*Call, error) {
	calls := []*Call{}
	size := 0
	max = listBytes(max)
	for size < max && rows.Next() {
		c, err := scan()
		if err != nil {
			return nil, err
		}
		calls = append(calls, c)
		size += c.Size()
	}
	return calls, rows.Err()
}
