package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestReadOutsideWorkdirAsks follows scenario 2: in default mode a coding agent's
// read-only command runs at once inside its checkout, while `cat ../secret` or a
// symlink out of the checkout waits for a person and, denied, reads nothing.
func TestReadOutsideWorkdirAsks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, body := range map[string]string{filepath.Join(repo, "main.go"): "package main\n", filepath.Join(root, "secret.txt"): "TOP-SECRET\n"} {
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "secret.txt"), filepath.Join(repo, "notes")); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Permissions.Allow = nil
		c.Sessions.WorkdirRoots = []string{repo}
	}})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": repo})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"

	_, evs := d.stream(calls, `{"calls":[{"id":"in","name":"execute_command","arguments":{"command":"cat main.go"}}]}`)
	if m := messages(t, evs)["in"]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "package main") {
		t.Fatalf("a read inside the checkout: %s", m.raw)
	}
	for _, cmd := range []string{"cat ../secret.txt", "cat notes"} {
		apr, rest, stop := streamUntilApproval(t, d, calls, `{"calls":[{"id":"out","name":"execute_command","arguments":{"command":"`+cmd+`"}}]}`)
		if reason, _ := apr["reason"].(string); !strings.Contains(reason, "outside the session's working directory") {
			stop()
			t.Fatalf("%s: approval reason %q does not say it reads outside the working directory", cmd, reason)
		}
		code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"deny","reason":"not yours","actor":"ada"}`)
		if code != 200 {
			stop()
			t.Fatalf("%s: deny: %d %s", cmd, code, body)
		}
		msgs := restMessages(t, <-rest)
		stop()
		if m := msgs["out"]; m.str("error_kind") != "denied" || strings.Contains(string(m.raw), "TOP-SECRET") {
			t.Fatalf("%s: denied call: %s", cmd, m.raw)
		}
	}
}
