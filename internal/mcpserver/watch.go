package mcpserver

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
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
	}
}

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
