package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// TestCallOutputLost: replicas share PostgreSQL; a call ran on replica A, which has
// stopped. Its output went with A: call output through B says the output is lost and
// where the result is (exit 1), rather than printing nothing as for a call that
// printed nothing.
func TestCallOutputLost(t *testing.T) {
	url := pgtest.URL(t)
	replica := func(id string) func(*config.Config) {
		return func(c *config.Config) {
			c.Store, c.ReplicaID = url, id
			c.Permissions.Allow = []string{"execute_command"}
		}
	}
	var call string
	t.Run("on A", func(t *testing.T) { // A stops when this subtest ends
		a := testdaemon.Start(t, replica("replica-a"))
		code, out, errOut := ctl(t, a.URL, "run", "--tools", "execute_command", "execute_command", `{"command":"echo from-a"}`)
		call = regexp.MustCompile(`tc_[0-9a-zA-Z]+`).FindString(out)
		if code != 0 || call == "" {
			t.Fatalf("run on A: %d %q %s", code, out, errOut)
		}
		if code, out, _ := ctl(t, a.URL, "call", "output", call); code != 0 || out != "from-a\n" {
			t.Fatalf("call output on A: %d %q", code, out)
		}
	})
	if call == "" {
		t.FailNow()
	}
	b := testdaemon.Start(t, replica("replica-b"))
	code, out, errOut := ctl(t, b.URL, "call", "output", call)
	if code != 1 || out != "" || !strings.Contains(errOut, "lost") || !strings.Contains(errOut, "call get "+call) {
		t.Fatalf("call output through B of A's call, A stopped: %d %q %q; want exit 1 saying the output is lost", code, out, errOut)
	}
	if code, out, _ := ctl(t, b.URL, "call", "get", call); code != 0 || !strings.Contains(out, "from-a") {
		t.Fatalf("call get through B: %d %q; want the recorded result", code, out)
	}
}
