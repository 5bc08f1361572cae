package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestVariableWordWaitsForApproval: `x=/etc/passwd; cat $x` reads /etc/passwd, outside
// the session's working directory, so in default mode it waits for a person as
// `cat /etc/passwd` does; it ran unasked while a word that was only a variable
// passed as inside. A variable the line sets to a path inside still runs unasked.
func TestVariableWordWaitsForApproval(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Permissions.Allow = nil // execute_command decided by its analysis
	}})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default"})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"

	ev, rest, stop := streamUntilFirst(t, d, calls,
		`{"calls":[{"id":"in","name":"execute_command","arguments":{"command":"f=.; ls $f && echo listed"}}]}`,
		"approval_required", "message")
	if ev["type"] == "approval_required" {
		stop()
		t.Fatalf("a variable set to a path inside asked for approval: %v", ev["approval"])
	}
	<-rest
	stop()
	if out, _ := json.Marshal(ev); !strings.Contains(string(out), "listed") {
		t.Fatalf("ls $f: %s", out)
	}

	apr, rest, stop := streamUntilApproval(t, d, calls,
		`{"calls":[{"id":"out","name":"execute_command","arguments":{"command":"x=/etc/passwd; cat $x"}}]}`)
	reason, _ := apr["reason"].(string)
	if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"deny","reason":"no","actor":"ada"}`); code != 200 {
		stop()
		t.Fatalf("deny: %d %s", code, body)
	}
	<-rest
	stop()
	if !strings.Contains(reason, "$x") || !strings.Contains(reason, "/etc/passwd") || strings.Contains(reason, "whatever the rules and mode say") {
		t.Fatalf("cat $x: approval reason %q; want an ordinary ask naming $x and /etc/passwd", reason)
	}
}
