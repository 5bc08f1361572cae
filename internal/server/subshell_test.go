package server_test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestSubshellRunsUnasked: a subshell ( … ) is judged by the commands in it, from
// the folders its own cds lead to. `(cd .skills/greeting && ls scripts)` lists the
// skill's scripts in default mode without asking; when a subshell was an immune
// ask, it waited for a person in every mode. What the subshell runs still asks as
// it would outside one, as an ordinary ask (rules and modes can settle it).
func TestSubshellRunsUnasked(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	skills := filepath.Join(filepath.Dir(file), "testdata", "skills")
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Skills.Dirs = []string{skills}
		c.Permissions.Allow = []string{"skill"} // execute_command decided by its analysis
	}})
	id := d.createSession(map[string]any{"available_tools": []string{"skill", "execute_command"}, "available_skills": []string{"greeting"},
		"permission_mode": "default"})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	_, evs := d.stream(calls, `{"calls":[{"id":"open","name":"skill","arguments":{"name":"greeting"}}]}`)
	if m := messages(t, evs)["open"]; !strings.Contains(string(m.raw), ".skills/greeting") {
		t.Fatalf("open: %s", m.raw)
	}

	runsUnasked(t, d, calls, "(cd .skills/greeting && ls scripts) && echo done", "greet.sh", "done")
	reason := asksThenDeny(t, d, calls, "(cd .skills/greeting && rm -rf scripts)")
	if strings.Contains(reason, "subshell") || strings.Contains(reason, "whatever the rules and mode say") || !strings.Contains(reason, "rm -rf scripts") {
		t.Fatalf("rm in a subshell: approval reason %q; want an ordinary ask naming rm -rf scripts", reason)
	}
}
