package main

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
	"github.com/toolserverd/toolserverd/internal/testnet"
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

// TestCallOutputFollowWaitsForUnreachableOwner: call output --follow through replica
// B of a call that runs on A, which B cannot reach while A lives (a 503 with
// Retry-After), waits for A again rather than giving up at the first read; once A
// has stopped, it says the output went with it.
func TestCallOutputFollowWaitsForUnreachableOwner(t *testing.T) {
	url := pgtest.URL(t)
	closed := "http://" + testnet.RefusedAddr(t) // nothing listens there
	replica := func(id string) func(*config.Config) {
		return func(c *config.Config) {
			c.Store, c.ReplicaID = url, id
			c.Permissions.Allow = []string{"execute_command"}
			c.Cluster.Lease = 2 * time.Second
			if id == "replica-a" {
				c.Cluster.AdvertiseURL = closed
			}
		}
	}
	b := testdaemon.Start(t, replica("replica-b"))
	type result struct {
		code        int
		out, errOut string
	}
	followed := make(chan result, 1)
	t.Run("while A runs the call", func(t *testing.T) { // A stops when this subtest ends
		a := testdaemon.Start(t, replica("replica-a"))
		ran := make(chan struct{})
		go func() {
			defer close(ran)
			_, _, _ = ctl(t, a.URL, "run", "--tools", "execute_command", "execute_command", `{"command":"echo started; sleep 6"}`)
		}()
		c := client.New(b.URL)
		var call string
		deadline := time.Now().Add(60 * time.Second)
		for call == "" {
			if time.Now().After(deadline) {
				t.Fatal("the call on A is not seen running")
			}
			l, err := c.ListCalls(context.Background(), client.CallFilter{})
			if err == nil {
				for _, r := range l.Calls {
					if r.Status == "running" {
						call = r.ID
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		var ce *client.Error
		if _, err := c.Progress(context.Background(), call, client.ProgressQuery{}); !errors.As(err, &ce) || ce.Status != 503 {
			t.Fatalf("progress through B of A's running call: %v; want 503 (A is out of reach)", err)
		}
		go func() {
			code, out, errOut := ctl(t, b.URL, "call", "output", "--follow", call)
			followed <- result{code, out, errOut}
		}()
		// It reads A's output through B for a while (it would have ended at once).
		select {
		case r := <-followed:
			t.Fatalf("call output --follow ended while A ran the call: %d %q %q; want it to wait", r.code, r.out, r.errOut)
		case <-time.After(3 * time.Second):
		}
		t.Cleanup(func() { <-ran })
	})
	select {
	case r := <-followed:
		// "toolserverd: 503 …" is the client's error line; the replica's address
		// (127.0.0.1:50363 in one CI run) may hold "503" too.
		if r.code != 1 || !strings.Contains(r.errOut, "lost") || strings.Contains(r.errOut, "toolserverd: 503") {
			t.Fatalf("call output --follow once A stopped: %d %q %q; want exit 1 saying the output is lost", r.code, r.out, r.errOut)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("call output --follow did not end after A stopped")
	}
}
