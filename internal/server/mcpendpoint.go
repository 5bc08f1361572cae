package server

import (
	"bytes"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"
)

// MCPEndpoint serves a session's tools over the MCP streamable-HTTP transport.
// sessionID is the session of a session-scoped URL, or empty on /mcp.
type MCPEndpoint interface {
	ServeMCP(w http.ResponseWriter, r *http.Request, sessionID string)
}

// serveMCP hands /mcp and /v1/sessions/{id}/mcp to the MCP endpoint. No timeout
// middleware: its responses may be long-lived event streams. A POST body is read
// here, under the cap of every other route: mcp-go reads whatever it is given.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if s.MCPEndpoint == nil {
		s.writeError(w, r, errorf(CodeNotFound, "the MCP endpoint is disabled (config mcp_endpoint.enabled)"))
		return
	}
	if r.Method == http.MethodPost {
		body, err := readBody(w, r, s.cfg.MaxBodyBytes)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.MCPEndpoint.ServeMCP(w, r, chi.URLParam(r, "sessionID"))
}
