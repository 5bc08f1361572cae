package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/toolserverd/toolserverd/internal/store"
)

// listToolCalls lists call records across sessions, newest first: what runs now
// (?status=pending,running,waiting) and what ran, for consoles; ?before=tc_… pages
// back from the last call of the previous page.
func (s *Server) listToolCalls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.CallFilter{Tenant: tenantOf(r), Limit: 50}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.writeError(w, r, errorf(CodeBadRequest, "limit must be a number from 1 to 1000"))
			return
		}
		f.Limit = n
	}
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
	if v := q.Get("before"); v != "" {
		c, err := s.Calls.GetCall(r.Context(), v)
		if errors.Is(err, store.ErrNotFound) || (err == nil && c.Tenant != f.Tenant) {
			s.writeError(w, r, errorf(CodeBadRequest, "before must be the id of a listed call (tc_…): the last one of the previous page"))
			return
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		f.Before, f.BeforeID = c.CreatedAt, c.ID
	}
	calls, err := s.Calls.ListRecentCalls(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toCallList(calls))
}
