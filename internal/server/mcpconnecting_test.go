package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestSessionKeepsToolsOfConnectingMCPServer: a session created while a declared MCP
// server is still connecting keeps the server's tools it names (exactly or by
// pattern) in its whitelist, with a warning saying the server is connecting, and has
// them once the server is ready; a call made before answers unavailable, not
// not_found. Names of no declared server are still dropped as unknown. The upstream
// is a real stdio server whose start the test holds back until it opens a gate, so
// the session is created while the server connects, for certain.
func TestSessionKeepsToolsOfConnectingMCPServer(t *testing.T) {
	t.Parallel()
	js := everythingServer(t)
	for _, declared := range []string{"config", "api"} {
		t.Run(declared, func(t *testing.T) {
			t.Parallel()
			gate := filepath.Join(t.TempDir(), "gate")
			// sh reads nothing until node runs: the initialize request waits in the pipe.
			srv := map[string]any{"name": "ev", "transport": "stdio", "command": "sh",
				"args": []string{"-c", `while [ ! -e "$1" ]; do sleep 0.02; done; exec node "$2" stdio`, "sh", gate, js}}
			d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
				c.Permissions.Allow = append(c.Permissions.Allow, "mcp__ev__*")
				if declared == "config" {
					c.MCPServers = []config.MCPServerConfig{{Name: "ev", Transport: "stdio", Command: "sh", Args: srv["args"].([]string)}}
				}
			}})
			if declared == "api" {
				if code, _, body := d.do("POST", "/v1/mcp/servers", srv); code != 201 {
					t.Fatalf("add: %d %s", code, body)
				}
			}

			// /readyz stays ready (the store is its check) and names the server starting.
			code, _, body := d.do("GET", "/readyz", nil)
			var ready struct {
				Status string
				Info   struct {
					MCP struct{ Starting, Down []string }
				}
			}
			if err := json.Unmarshal(body, &ready); err != nil || code != 200 || ready.Status != "ready" ||
				!slices.Equal(ready.Info.MCP.Starting, []string{"ev"}) || !slices.Equal(ready.Info.MCP.Down, []string{"ev"}) {
				t.Errorf("readyz while ev starts: %d %s", code, body)
			}

			s := d.createSession(map[string]any{"available_tools": []string{
				"mcp__ev__echo", "mcp__ev__get-su*", "mcp__nope__echo", "no_such_tool", "read_file"}})
			id := s["id"].(string)
			if got, want := toStrings(s["available_tools"]), []string{"mcp__ev__echo", "mcp__ev__get-su*", "read_file"}; !slices.Equal(got, want) {
				t.Errorf("available_tools = %v, want %v", got, want)
			}
			if got := toStrings(s["tools"]); !slices.Equal(got, []string{"read_file"}) {
				t.Errorf("tools while ev connects = %v, want [read_file]", got)
			}
			warnings := strings.Join(toStrings(s["warnings"]), "\n")
			for _, want := range []string{
				"tool mcp__ev__echo is not available yet: mcp server ev is connecting",
				"tool pattern matches no tool yet: mcp__ev__get-su* (mcp server ev is connecting)",
				"unknown tool: mcp__nope__echo",
				"unknown tool: no_such_tool",
			} {
				if !strings.Contains(warnings, want) {
					t.Errorf("warnings lack %q:\n%s", want, warnings)
				}
			}
			if strings.Contains(warnings, "unknown tool: mcp__ev__") {
				t.Errorf("a tool of ev is called unknown:\n%s", warnings)
			}

			// A call now: the server is connecting (the gate is shut), which the model is told.
			_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"e","name":"mcp__ev__echo","arguments":{"message":"early"}}]}`)
			if m := messages(t, evs)["e"]; m.str("error_kind") != "unavailable" || !strings.Contains(string(m.raw), "mcp server ev is connecting") {
				t.Errorf("call while ev connects: %s, want unavailable saying ev is connecting", m.raw)
			}

			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the session lists ev's tools", func() bool {
				_, _, body := d.do("GET", "/v1/sessions/"+id, nil)
				var got struct{ Tools []string }
				_ = json.Unmarshal(body, &got)
				// Both: the session can see a server's tools before all of them are in.
				return slices.Contains(got.Tools, "mcp__ev__echo") && slices.Contains(got.Tools, "mcp__ev__get-sum")
			})
			_, _, body = d.do("GET", "/v1/sessions/"+id, nil)
			var got struct{ Tools, AvailableTools []string }
			_ = json.Unmarshal(body, &got)
			if want := []string{"mcp__ev__echo", "mcp__ev__get-sum", "read_file"}; !slices.Equal(got.Tools, want) {
				t.Errorf("tools once ev is ready = %v, want %v", got.Tools, want)
			}
			_, evs = d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[
				{"id":"e","name":"mcp__ev__echo","arguments":{"message":"hello late"}},
				{"id":"s","name":"mcp__ev__get-sum","arguments":{"a":2,"b":40}}]}`)
			msgs := messages(t, evs)
			if m := msgs["e"]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "hello late") {
				t.Errorf("echo once ev is ready: %s", m.raw)
			}
			if m := msgs["s"]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "42") {
				t.Errorf("get-sum once ev is ready: %s", m.raw)
			}

			code, _, body = d.do("GET", "/readyz", nil)
			ready.Info.MCP.Starting, ready.Info.MCP.Down = nil, nil
			if err := json.Unmarshal(body, &ready); err != nil || code != 200 || len(ready.Info.MCP.Starting)+len(ready.Info.MCP.Down) != 0 {
				t.Errorf("readyz once ev is ready: %d %s", code, body)
			}
		})
	}
}
