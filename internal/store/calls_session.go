package store

import "time"

// CallPage is a page of one session's calls, in the listing's order: created_at, then
// id, descending.
type CallPage struct {
	// Limit caps the answer; <= 0 means no limit.
	Limit int
	// Before pages backwards: only calls ordered after (Before, BeforeID), such as the
	// last call of the previous page. Zero Before: from the newest.
	Before   time.Time
	BeforeID string
	// MaxBytes bounds what the listing reads (see ListBytes); <= 0 means ListBytes.
	MaxBytes int
}

// The session's calls are found through tool_calls_session_tool_call_id_idx
// (session_id, tool_call_id, created_at): a range of the session's entries, never the
// table nor the tenant's calls. That index is not in created_at order, so the rows of
// the session older than the cursor are sorted (top-N, the page's size). The tenant's
// index (tenant, created_at, id) is in order but would walk every call of the tenant
// made since the session's (an idle session of a busy tenant: all of them) and, on the
// last page, every older one; an index (session_id, created_at, id) would serve a page
// as a range, at the price of one more index entry for every call recorded.

func sqliteSessionCallsQuery(sessionID string, p CallPage) (string, []any) {
	q := `SELECT ` + sqliteCallColumns + ` FROM tool_calls WHERE session_id = ?`
	args := []any{sessionID}
	if !p.Before.IsZero() {
		q += ` AND (created_at, id) < (?, ?)`
		args = append(args, sqliteTime(p.Before), p.BeforeID)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	return q + ` ORDER BY created_at DESC, id DESC LIMIT ?`, append(args, limit)
}

func pgSessionCallsQuery(sessionID string, p CallPage) (string, []any) {
	var limit *int // NULL: LIMIT ALL
	if p.Limit > 0 {
		limit = &p.Limit
	}
	cond := ""
	args := []any{sessionID, limit}
	if !p.Before.IsZero() {
		cond = ` AND (created_at, id) < ($3, $4)`
		args = append(args, utcMicro(p.Before), p.BeforeID)
	}
	return `SELECT ` + pgCallColumns + ` FROM tool_calls WHERE session_id = $1` + cond + `
		ORDER BY created_at DESC, id DESC LIMIT $2`, args
}
