package server_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestProviderBashRunsTheCheckedCommand: the permission check reads the provider bash
// tool's "command" argument by its exact name; the command that runs must be that
// one. Go's JSON decoding matches keys case-insensitively, the last one winning, so
// {"command":"ls","Command":"…"} was checked as ls (read-only, allowed without asking)
// and ran the other command.
func TestProviderBashRunsTheCheckedCommand(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Permissions.Allow = nil
		c.ProviderTools = []config.ProviderToolConfig{{Name: "bash", Kind: "provider_defined", Handler: "execute_command",
			Specs: map[string]map[string]any{"anthropic": {"type": "bash_20250124"}}}}
	}})
	sess := d.createSession(map[string]any{"available_tools": []string{"bash"}})
	id, wd := sess["id"].(string), sess["workdir"].(string)
	evs, done := firstEvents(t, d, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"type":"tool_use","id":"b","name":"bash","input":{"command":"ls","Command":"echo ran > ran.txt"}}]}`, 10*time.Second)
	if _, err := os.Stat(filepath.Join(wd, "ran.txt")); err == nil {
		t.Fatalf("a command the permission check never saw ran: %s", rawLines(evs))
	}
	if done {
		if m := messages(t, evs)["b"]; m.m["is_error"] != false {
			t.Fatalf("the checked command (ls) failed: %s", m.raw)
		}
	}
}
