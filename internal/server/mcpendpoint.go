package server

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// MCPEndpoint serves a session's tools over the MCP streamable-HTTP transport.
// sessionID is the session of a session-scoped URL, or empty on /mcp.
type MCPEndpoint interface {
	ServeMCP(w http.ResponseWriter, r *http.Request, sessionID string)
}

// serveMCP hands /mcp and /v1/sessions/{id}/mcp to the MCP endpoint. No timeout
// middleware: its responses may be long-lived event streams.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if s.MCPEndpoint == nil {
		s.writeError(w, r, errorf(CodeNotFound, "the MCP endpoint is disabled (config mcp_endpoint.enabled)"))
		return
	}
	s.MCPEndpoint.ServeMCP(w, r, chi.URLParam(r, "sessionID"))
}
