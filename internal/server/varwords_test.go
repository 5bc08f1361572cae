package server_test

import (
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

	runsUnasked(t, d, calls, "f=.; ls $f && echo listed", "listed")
	reason := asksThenDeny(t, d, calls, "x=/etc/passwd; cat $x")
	if !strings.Contains(reason, "$x") || !strings.Contains(reason, "/etc/passwd") || strings.Contains(reason, "whatever the rules and mode say") {
		t.Fatalf("cat $x: approval reason %q; want an ordinary ask naming $x and /etc/passwd", reason)
	}
}
