package server

import (
	"net/http"

	"github.com/toolserverd/toolserverd/internal/store"
)

// callEvents replays one call as NDJSON — tool_start, its approval requests, the
// output recorded so far — then follows it until its message, then done. It works
// for calls whose stream is gone (a client that reconnects, a call decided after a
// restart) and for calls still running.
func (s *Server) callEvents(w http.ResponseWriter, r *http.Request) {
	f, err := messageFormat(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, err := s.call(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The call's output is in the data_dir of the replica that runs it: followed
	// from here it would have no tool_progress.
	if s.forwardEvents(w, r, rec, s.callEvents) {
		return
	}
	s.streamBatch(w, r, f, stream{followed: []*store.Call{rec}})
}
