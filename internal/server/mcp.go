package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/toolserverd/toolserverd/internal/mcpproxy"
)

// MCPServers manages the upstream MCP servers.
type MCPServers interface {
	Status() []mcpproxy.ServerStatus
	Add(ctx context.Context, cfg mcpproxy.ServerConfig) error
	Remove(name string) error
	Restart(name string) error
}

// listMCPServers shows every upstream server's state; configurations (which may hold
// tokens in env or headers) are never shown.
func (s *Server) listMCPServers(w http.ResponseWriter, r *http.Request) {
	if s.MCP == nil {
		writeJSON(w, http.StatusOK, map[string]any{"servers": []mcpproxy.ServerStatus{}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"servers": s.MCP.Status()})
}

// addMCPServer connects a new server at run time (in the background: the answer does
// not wait for it) and keeps it in the store.
func (s *Server) addMCPServer(w http.ResponseWriter, r *http.Request) {
	if s.MCP == nil {
		s.writeError(w, r, errorf(CodeUnavailable, "the MCP proxy is not running"))
		return
	}
	var raw json.RawMessage
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, &raw); err != nil {
		s.writeError(w, r, err)
		return
	}
	// A key twice is refused (the last value won: another command), as for a session.
	if err := refuseDuplicateKeys(raw, mcpproxy.ServerConfigShape); err != nil {
		s.writeError(w, r, err)
		return
	}
	cfg, err := mcpproxy.DecodeServerConfig(raw)
	if err != nil {
		s.writeError(w, r, errorf(CodeInvalidJSON, "server config: "+strings.TrimPrefix(err.Error(), "json: ")))
		return
	}
	if err := cfg.Validate(); err != nil {
		s.writeError(w, r, errorf(CodeBadRequest, err.Error()))
		return
	}
	if err := cfg.RefuseEnvReferences(); err != nil {
		s.writeError(w, r, errorf(CodeBadRequest, err.Error()))
		return
	}
	err = s.MCP.Add(r.Context(), cfg)
	switch {
	case errors.Is(err, mcpproxy.ErrServerExists):
		s.writeError(w, r, errorf(CodeConflict, "an MCP server named "+cfg.Name+" exists"))
		return
	case errors.Is(err, mcpproxy.ErrNamespaceTaken):
		s.writeError(w, r, errorf(CodeConflict, "MCP server "+cfg.Name+" is not added: "+
			strings.TrimPrefix(err.Error(), mcpproxy.ErrNamespaceTaken.Error()+": ")))
		return
	case errors.Is(err, mcpproxy.ErrNotRunning):
		s.writeError(w, r, errorf(CodeUnavailable, "the MCP proxy is not running"))
		return
	case err != nil:
		s.writeError(w, r, err)
		return
	}
	s.audit(r, AuditMCPServerAdded, cfg.Name, map[string]any{"transport": cfg.Transport})
	w.Header().Set("Location", "/v1/mcp/servers/"+cfg.Name)
	writeJSON(w, http.StatusCreated, s.mcpStatus(cfg.Name))
}

func (s *Server) mcpStatus(name string) any {
	for _, st := range s.MCP.Status() {
		if st.Name == name {
			return st
		}
	}
	return map[string]string{"name": name}
}

func (s *Server) deleteMCPServer(w http.ResponseWriter, r *http.Request) {
	s.mcpAction(w, r, s.MCP.Remove, http.StatusNoContent, AuditMCPServerRemoved)
}

func (s *Server) restartMCPServer(w http.ResponseWriter, r *http.Request) {
	s.mcpAction(w, r, s.MCP.Restart, http.StatusAccepted, AuditMCPServerRestart)
}

func (s *Server) mcpAction(w http.ResponseWriter, r *http.Request, fn func(string) error, status int, action string) {
	if s.MCP == nil {
		s.writeError(w, r, errorf(CodeNotFound, "unknown MCP server"))
		return
	}
	name := pathParam(r, "name")
	err := fn(name)
	switch {
	case errors.Is(err, mcpproxy.ErrUnknownServer):
		s.writeError(w, r, errorf(CodeNotFound, "unknown MCP server "+name))
	case errors.Is(err, mcpproxy.ErrNotRunning):
		s.writeError(w, r, errorf(CodeUnavailable, "the MCP proxy is not running"))
	case errors.Is(err, mcpproxy.ErrServerDisabled):
		// The API cannot change a server's configuration: enabling is re-adding.
		s.writeError(w, r, errorf(CodeConflict, "MCP server "+name+` is disabled, so it is not connected and cannot be restarted; `+
			`to enable it, set "enabled": true in its configuration (for a server added through the API: DELETE it, then POST it again with "enabled": true)`))
	case err != nil:
		s.writeError(w, r, err)
	case status == http.StatusNoContent:
		s.audit(r, action, name, nil)
		w.WriteHeader(status)
	default:
		s.audit(r, action, name, nil)
		writeJSON(w, status, s.mcpStatus(name))
	}
}
