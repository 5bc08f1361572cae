package server_test

import (
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestRankedListingWithGroups: a ranked listing (?query=) offers only tools the session
// can call now, fills its limit with them (tools of inactive groups do not take
// places), and offers reset_tools whenever groups exist, as the unranked listing
// does, so the model can always switch a group on.
func TestRankedListingWithGroups(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.ToolGroups = []config.ToolGroupConfig{
			{Name: "web", Description: "Fetch web pages.", Tools: []string{"web_*"}},
		}
	}})
	id := d.createSession(map[string]any{})["id"].(string)
	_, _, body := d.do("GET", "/v1/sessions/"+id+"/tools?query=fetch+web+page+read+file&limit=3", nil)
	names := toolNames(t, body)
	var real []string
	protocol := 0
	for _, n := range names {
		switch {
		case n == "tool_expand_tools" || n == "reset_tools":
			protocol++
		case strings.HasPrefix(n, "web_"):
			t.Errorf("a tool of an inactive group offered: %v", names)
		default:
			real = append(real, n)
		}
	}
	if len(real) != 3 || protocol != 2 {
		t.Errorf("ranked listing with limit 3: %v", names)
	}

	// A small toolset is listed whole, with reset_tools.
	small := d.createSession(map[string]any{"available_tools": []string{"echo", "web_fetch"}})["id"].(string)
	for _, q := range []string{"query=echo+some+text", "query=zzzz+qqqq"} {
		_, _, body = d.do("GET", "/v1/sessions/"+small+"/tools?"+q, nil)
		if got := strings.Join(toolNames(t, body), ","); got != "echo,reset_tools" {
			t.Errorf("%s: small toolset with groups: %s", q, got)
		}
	}
}

// TestBackgroundStartNamesGatedJobTools: with the job tools in a tool group that is
// switched off, a background start told the model "This session has no tool to
// follow it: its output and exit code will not be shown", though reset_tools would
// switch them on. It names them, and a call of one says how to switch them on.
func TestBackgroundStartNamesGatedJobTools(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.ToolGroups = []config.ToolGroupConfig{
			{Name: "jobs", Description: "Follow background jobs.", Tools: []string{"await_job", "read_job_output", "kill_job"}},
		}
	}})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command", "await_job", "read_job_output", "kill_job"}})["id"].(string)
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"bg","name":"execute_command","arguments":{"command":"true","background":true}}]}`)
	text := string(messages(t, evs)["bg"].raw)
	if strings.Contains(text, "no tool to follow it") || !strings.Contains(text, "await_job") {
		t.Errorf("background start with the job tools in a switched-off group: %s", text)
	}
	_, evs = d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"aw","name":"await_job","arguments":{"job_id":"x"}}]}`)
	if text := string(messages(t, evs)["aw"].raw); !strings.Contains(text, "reset_tools") {
		t.Errorf("await_job in a switched-off group: %s; want how to switch it on", text)
	}
}
