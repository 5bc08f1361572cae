package server_test

import (
	"encoding/json"
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

	ev, rest, stop := streamUntilFirst(t, d, calls,
		`{"calls":[{"id":"ls","name":"execute_command","arguments":{"command":"(cd .skills/greeting && ls scripts) && echo done"}}]}`,
		"approval_required", "message")
	if ev["type"] == "approval_required" {
		stop()
		t.Fatalf("the subshell asked for approval: %v", ev["approval"])
	}
	<-rest
	stop()
	if out, _ := json.Marshal(ev); !strings.Contains(string(out), "greet.sh") || !strings.Contains(string(out), "done") {
		t.Fatalf("ls in the subshell: %s", out)
	}

	apr, rest, stop := streamUntilApproval(t, d, calls,
		`{"calls":[{"id":"rm","name":"execute_command","arguments":{"command":"(cd .skills/greeting && rm -rf scripts)"}}]}`)
	reason, _ := apr["reason"].(string)
	if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"deny","reason":"no","actor":"ada"}`); code != 200 {
		stop()
		t.Fatalf("deny: %d %s", code, body)
	}
	<-rest
	stop()
	if strings.Contains(reason, "subshell") || strings.Contains(reason, "whatever the rules and mode say") || !strings.Contains(reason, "rm -rf scripts") {
		t.Fatalf("rm in a subshell: approval reason %q; want an ordinary ask naming rm -rf scripts", reason)
	}
}
