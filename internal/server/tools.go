package server

import (
	"net/http"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

type toolsResponse struct {
	Format toolmgr.Format `json:"format"`
	Tools  []any          `json:"tools"`
	// Omitted names hosted tools left out because another provider runs them.
	Omitted []toolmgr.OmittedTool `json:"omitted,omitempty"`
	// NoMatch says the turn's query matched no tool (the list is the turn before's).
	NoMatch bool `json:"no_match,omitempty"`
}

// listTools lists every registered tool (the global registry).
func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	f, err := toolmgr.ParseFormat(r.URL.Query().Get("format"))
	if err != nil {
		s.writeError(w, r, errorf(CodeBadRequest, err.Error()))
		return
	}
	specs := s.Tools.Specs()
	if s.Sessions != nil { // every registry, MCP servers' tools included
		specs = s.Sessions.Specs()
	}
	writeJSON(w, http.StatusOK, toolsResponse{Format: f, Tools: toolmgr.Export(specs, f), Omitted: toolmgr.Omitted(specs, f)})
}

// listSessionTools lists the tools a session may call, in the provider's format.
func (s *Server) listSessionTools(w http.ResponseWriter, r *http.Request) {
	f, err := toolmgr.ParseFormat(r.URL.Query().Get("format"))
	if err != nil {
		s.writeError(w, r, errorf(CodeBadRequest, err.Error()))
		return
	}
	q := r.URL.Query()
	limit := 0
	n, err := queryLimit(q, limit, 200)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit = n
	sess, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var specs []tool.Spec
	noMatch := false
	if q.Has("query") {
		// The turn's text narrows the list: the best-ranked tools plus
		// tool_expand_tools; the others stay callable after an expansion. An empty
		// query lifts the narrowing.
		specs, noMatch = s.Sessions.Suggest(sess, q.Get("query"), limit)
		if err := s.Sessions.SaveState(r.Context(), sess); err != nil {
			// The listing holds on this replica; others and a restart miss it.
			s.log.WarnContext(r.Context(), "saving the session's tool selection failed", "session_id", sess.ID, "err", err)
		}
	} else {
		// Without a query the turn goes on: what it may call now, expansions included.
		specs = sess.SelectedSpecs()
	}
	writeJSON(w, http.StatusOK, toolsResponse{Format: f, Tools: toolmgr.Export(specs, f), Omitted: toolmgr.Omitted(specs, f), NoMatch: noMatch})
}
