package server_test

import (
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestExploreModeSwitchesGroups: in explore mode, a call of a read-only tool that a
// switched-off group hides was answered "call reset_tools with {…}", and that call was
// then refused as one that "could change something", a dead end. reset_tools
// changes only the session's own tool list, as tool_expand_tools does (which explore
// mode runs): it runs, and the read-only tool then runs too.
func TestExploreModeSwitchesGroups(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.ToolGroups = []config.ToolGroupConfig{{Name: "search", Description: "Find files.", Tools: []string{"glob"}}}
	}})
	id := d.createSession(map[string]any{"permission_mode": "explore"})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	_, evs := d.stream(calls, `{"calls":[{"id":"g","name":"glob","arguments":{"pattern":"*"}}]}`)
	if m := messages(t, evs)["g"]; !strings.Contains(string(m.raw), `reset_tools with {\"search\":true}`) {
		t.Fatalf("call of a switched-off group's tool: %s", m.raw)
	}
	_, evs = d.stream(calls, `{"calls":[{"id":"r","name":"reset_tools","arguments":{"search":true}}]}`)
	if m := messages(t, evs)["r"]; m.m["is_error"] != false {
		t.Fatalf("reset_tools in explore mode: %s", m.raw)
	}
	_, evs = d.stream(calls, `{"calls":[{"id":"g","name":"glob","arguments":{"pattern":"*"}}]}`)
	if m := messages(t, evs)["g"]; m.m["is_error"] != false {
		t.Fatalf("glob after its group was switched on: %s", m.raw)
	}
}
