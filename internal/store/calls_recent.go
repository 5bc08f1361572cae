package store

import (
	"context"
	"fmt"
	"strings"
)

// CallFilter selects calls across sessions (for consoles: what runs now, what ran).
type CallFilter struct {
	// Tenant is required: a listing never crosses tenants.
	Tenant string
	// Statuses keeps calls in any of these states; empty keeps all.
	Statuses []CallStatus
	// Limit caps the answer; <= 0 means 100.
	Limit int
}

func (f CallFilter) limit() int {
	if f.Limit <= 0 {
		return 100
	}
	return f.Limit
}

func (f CallFilter) statuses() []string {
	out := make([]string, len(f.Statuses))
	for i, s := range f.Statuses {
		out[i] = string(s)
	}
	return out
}

// ListRecentCalls returns the tenant's calls in any session, newest first (ties: id
// descending), at most f.Limit.
func (s *SQLite) ListRecentCalls(ctx context.Context, f CallFilter) ([]*Call, error) {
	q := `SELECT ` + sqliteCallColumns + ` FROM tool_calls WHERE tenant = ?`
	args := []any{f.Tenant}
	if st := f.statuses(); len(st) > 0 {
		q += ` AND status IN (?` + strings.Repeat(`, ?`, len(st)-1) + `)`
		for _, v := range st {
			args = append(args, v)
		}
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, f.limit())
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list recent calls: %w", err)
	}
	defer rows.Close()
	calls := []*Call{}
	for rows.Next() {
		c, err := scanSQLiteCall(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list recent calls: %w", err)
		}
		calls = append(calls, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list recent calls: %w", err)
	}
	return calls, nil
}

// ListRecentCalls returns the tenant's calls in any session, newest first (ties: id
// descending), at most f.Limit.
func (p *Postgres) ListRecentCalls(ctx context.Context, f CallFilter) ([]*Call, error) {
	var statuses []string // NULL: every status
	if st := f.statuses(); len(st) > 0 {
		statuses = st
	}
	rows, err := p.pool.Query(ctx,
		`SELECT `+pgCallColumns+` FROM tool_calls WHERE tenant = $1 AND ($2::text[] IS NULL OR status = ANY($2))
		ORDER BY created_at DESC, id DESC LIMIT $3`, f.Tenant, statuses, f.limit())
	if err != nil {
		return nil, fmt.Errorf("store: list recent calls: %w", err)
	}
	defer rows.Close()
	calls := []*Call{}
	for rows.Next() {
		c, err := scanPGCall(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list recent calls: %w", err)
		}
		calls = append(calls, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list recent calls: %w", err)
	}
	return calls, nil
}
