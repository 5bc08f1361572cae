package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpsrv "github.com/mark3labs/mcp-go/server"

	"github.com/toolserverd/toolserverd/internal/session"
)

// watch sends notifications/tools/list_changed to a client whose session's tool
// set differs from the one it was last told about: tools of upstream MCP servers
// came or went, reset_tools switched groups, the turn's selection changed. It
// compares on every tick and right after each call through the endpoint.
func (e *Endpoint) watch() {
	defer close(e.loopDone)
	t := time.NewTicker(e.cfg.ListChangedInterval)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		case <-e.kick:
		}
		e.compare()
		e.forgetIdle()
	}
}

// forgetIdle ends the MCP sessions idle longer than the TTL, as a DELETE from their
// client would.
func (e *Endpoint) forgetIdle() {
	if e.cfg.SessionIdleTTL <= 0 {
		return
	}
	for _, id := range e.ids.idle(time.Now().Add(-e.cfg.SessionIdleTTL)) {
		e.forget(id)
		e.deps.Log.Info("mcp endpoint: forgot an idle MCP session", "mcp_session_id", id)
	}
}

// forgetOverCap ends the least recently used MCP sessions past MaxSessions.
func (e *Endpoint) forgetOverCap() {
	if e.cfg.MaxSessions <= 0 {
		return
	}
	for _, id := range e.ids.overCap(e.cfg.MaxSessions) {
		e.forget(id)
		e.deps.Log.Debug("mcp endpoint: forgot the least recently used MCP session (mcp_endpoint.max_sessions)", "mcp_session_id", id)
	}
}

// forget ends an MCP session as a DELETE from its client would.
func (e *Endpoint) forget(id string) {
	req, err := http.NewRequest(http.MethodDelete, "/mcp", nil)
	if err != nil {
		return
	}
	req.Header.Set(mcpsrv.HeaderKeySessionID, id)
	e.http.ServeHTTP(discardWriter{}, req)
}

// discardWriter is the response writer of the endpoint's own DELETEs.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}

// poke asks the watcher to compare now.
func (e *Endpoint) poke() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func (e *Endpoint) compare() {
	e.mu.Lock()
	type owned struct{ tenant, id string }
	bySession := map[owned][]string{}
	for mcpSID, b := range e.bindings {
		k := owned{b.tenant, b.sessionID}
		bySession[k] = append(bySession[k], mcpSID)
	}
	e.mu.Unlock()
	for k, clients := range bySession {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		sess, err := e.deps.Sessions.Get(ctx, k.tenant, k.id)
		cancel()
		if errors.Is(err, session.ErrNotFound) {
			// The session was deleted: its MCP sessions can do nothing more (every
			// request, their client's DELETE too, is a 404), yet each would keep its
			// replay buffer, its listening pump and its place under MaxSessions until
			// the idle TTL; end them now.
			for _, mcpSID := range clients {
				e.forget(mcpSID)
				e.deps.Log.Info("mcp endpoint: ended an MCP session whose session was deleted", "mcp_session_id", mcpSID, "session_id", k.id)
			}
			continue
		}
		if err != nil {
			continue
		}
		print := fingerprint(visibleSpecs(sess))
		for _, mcpSID := range clients {
			e.mu.Lock()
			b := e.bindings[mcpSID]
			changed := b != nil && b.print != print
			if changed {
				b.print = print
			}
			e.mu.Unlock()
			if changed {
				_ = e.mcp.SendNotificationToSpecificClient(mcpSID, mcp.MethodNotificationToolsListChanged, nil)
			}
		}
	}
}
