package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestMCPServerChangesReachEveryReplica: an MCP server added through the API on
// replica A (kept in the shared store) is connected by replica B too, without a
// restart, and its tools run there; restarting it on A restarts it on B; a server
// replaced on A (deleted, added again with another configuration) is replaced on B;
// deleting it on A takes it off B.
func TestMCPServerChangesReachEveryReplica(t *testing.T) {
	t.Parallel()
	js := everythingServer(t)
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Permissions.Allow = append(c.Permissions.Allow, "mcp__everything__*", "ev__*")
	})
	restarts := func(d *daemon) int {
		_, _, body := d.do("GET", "/v1/mcp/servers", nil)
		var list struct{ Servers []struct{ Restarts int } }
		_ = json.Unmarshal(body, &list)
		if len(list.Servers) != 1 {
			return -1
		}
		return list.Servers[0].Restarts
	}
	serverOn := func(d *daemon) (state, persisted string) {
		_, _, body := d.do("GET", "/v1/mcp/servers", nil)
		var list struct {
			Servers []struct {
				Name, State string
				Persisted   bool
				Tools       int
			}
		}
		_ = json.Unmarshal(body, &list)
		for _, s := range list.Servers {
			if s.Name == "everything" {
				return s.State, map[bool]string{true: "persisted", false: "configured"}[s.Persisted]
			}
		}
		return "", ""
	}
	sessionTools := func(d *daemon, pattern string) string {
		return strings.Join(toStrings(d.createSession(map[string]any{"available_tools": []string{pattern}})["tools"]), ",")
	}

	if code, _, body := a.do("POST", "/v1/mcp/servers", map[string]any{"name": "everything", "transport": "stdio", "command": "node", "args": []string{js, "stdio"}}); code != 201 {
		t.Fatalf("add on A: %d %s", code, body)
	}
	start := time.Now()
	waitFor(t, 45*time.Second, "the server added on A is ready on B", func() bool {
		st, p := serverOn(b)
		return st == "ready" && p == "persisted"
	})
	t.Logf("added on A → ready on B in %s", time.Since(start))
	if tools := sessionTools(b, "mcp__everything__*"); !strings.Contains(tools, "mcp__everything__echo") {
		t.Fatalf("session tools on B: %s", tools)
	}
	s := b.createSession(map[string]any{"available_tools": []string{"mcp__everything__echo"}})
	_, evs := b.stream("/v1/sessions/"+s["id"].(string)+"/tool-calls", `{"calls":[{"id":"e","name":"mcp__everything__echo","arguments":{"message":"via B"}}]}`)
	if m := messages(t, evs)["e"]; !strings.Contains(string(m.raw), "via B") || m.m["is_error"] != false {
		t.Fatalf("call on B: %s", m.raw)
	}

	// Restarted on A: restarted on B too.
	before := restarts(b)
	if code, _, body := a.do("POST", "/v1/mcp/servers/everything/restart", nil); code != 202 {
		t.Fatalf("restart on A: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "the server restarted on A is restarted on B", func() bool {
		st, _ := serverOn(b)
		return restarts(b) > before && st == "ready"
	})

	// Replaced on A: the same name, tools under another prefix.
	if code, _, body := a.do("DELETE", "/v1/mcp/servers/everything", nil); code != 204 {
		t.Fatalf("delete on A: %d %s", code, body)
	}
	if code, _, body := a.do("POST", "/v1/mcp/servers", map[string]any{"name": "everything", "transport": "stdio", "command": "node", "args": []string{js, "stdio"}, "prefix": "ev__"}); code != 201 {
		t.Fatalf("add again on A: %d %s", code, body)
	}
	waitFor(t, 45*time.Second, "the server replaced on A is replaced on B", func() bool {
		st, _ := serverOn(b)
		return st == "ready" && strings.Contains(sessionTools(b, "ev__*"), "ev__echo") && !strings.Contains(sessionTools(b, "mcp__everything__*"), "mcp__everything__echo")
	})

	// Deleted on A: gone from B, and its tools with it.
	if code, _, body := a.do("DELETE", "/v1/mcp/servers/everything", nil); code != 204 {
		t.Fatalf("delete on A: %d %s", code, body)
	}
	start = time.Now()
	waitFor(t, 30*time.Second, "the server deleted on A is gone from B", func() bool {
		st, _ := serverOn(b)
		return st == ""
	})
	t.Logf("deleted on A → gone from B in %s", time.Since(start))
	_, evs = b.stream("/v1/sessions/"+s["id"].(string)+"/tool-calls", `{"calls":[{"id":"e","name":"mcp__everything__echo","arguments":{"message":"x"}}]}`)
	if m := messages(t, evs)["e"]; m.str("error_kind") != "not_found" {
		t.Fatalf("call on B after the delete on A: %s", m.raw)
	}
	if code, _, _ := b.do("DELETE", "/v1/mcp/servers/everything", nil); code != 404 {
		t.Fatalf("delete on B of the server deleted on A: %d, want 404", code)
	}
}
