package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// listToolCalls lists call records across sessions, newest first: what is live now
// (?live=true: active, or finished with its output still open), what runs
// (?status=pending,running,waiting) and what ran, for consoles; ?before=tc_… pages
// back from the last call of the previous page (cursor.go).
func (s *Server) listToolCalls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.CallFilter{Tenant: tenantOf(r), Limit: 50, MaxBytes: s.cfg.ListBytes}
	n, err := queryLimit(q, f.Limit, 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.Limit = n
	if v := q.Get("status"); v != "" {
		for _, part := range strings.Split(v, ",") {
			st := store.CallStatus(strings.TrimSpace(part))
			switch st {
			case store.CallPending, store.CallRunning, store.CallWaiting, store.CallSucceeded, store.CallFailed:
				f.Statuses = append(f.Statuses, st)
			default:
				s.writeError(w, r, errorf(CodeBadRequest, "status must be a comma-separated list of pending, running, waiting, succeeded, failed"))
				return
			}
		}
	}
	switch q.Get("live") {
	case "", "false":
	case "true":
		f.Live = true
	default:
		s.writeError(w, r, errorf(CodeBadRequest, "live must be true or false"))
		return
	}
	if v := q.Get("before"); v != "" {
		at, id, err := s.callListing(f.Tenant, "").before(r.Context(), v)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		f.Before, f.BeforeID = at, id
	}
	calls, err := s.Calls.ListRecentCalls(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toCallList(calls, f.Limit, f.MaxBytes))
}

// callListing pages through the calls of tenant or, with sessionID, of that session:
// a before naming a call of another tenant is as unknown as one never made, and one
// of another session of the tenant is refused.
func (s *Server) callListing(tenant, sessionID string) listing {
	return listing{noun: "call", prefix: "tc_", find: func(ctx context.Context, id string) (time.Time, error) {
		c, err := s.Calls.GetCall(ctx, id)
		if err != nil {
			return time.Time{}, err
		}
		if c.Tenant != tenant {
			return time.Time{}, store.ErrNotFound
		}
		if sessionID != "" && c.SessionID != sessionID {
			return time.Time{}, errorf(CodeBadRequest, "before: call "+id+" is of another session; pass one listed on this session's previous page")
		}
		return c.CreatedAt, nil
	}}
}
