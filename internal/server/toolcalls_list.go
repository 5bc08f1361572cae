package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/toolserverd/toolserverd/internal/store"
)

// listToolCalls lists call records across sessions, newest first: what runs now
// (?status=pending,running,waiting) and what ran, for consoles.
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
	calls, err := s.Calls.ListRecentCalls(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toCallList(calls))
}
