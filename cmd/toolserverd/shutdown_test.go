package main

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
)

// TestSecondSignalEndsTheDrain: a second SIGTERM while the daemon drains ends the
// drain at once: the call still running is cancelled as at the drain deadline (its
// stream and its record say so), the log names it, and the process exits cleanly
// instead of waiting out shutdown_timeout.
func TestSecondSignalEndsTheDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary and signals it")
	}
	bin := buildBinary(t)
	dataDir := t.TempDir()
	p := startWaitingIn(t, bin, dataDir, "", "TOOLSERVER_SHUTDOWN_TIMEOUT=10m")
	url := "http://" + p.next(t, 60*time.Second, "toolserverd listening")["addr"].(string)
	c := client.New(url)
	ctx := context.Background()
	sess, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 1)
	msgs := make(chan client.Event, 1)
	ran := make(chan error, 1)
	go func() {
		ran <- c.Run(ctx, sess.ID, "", client.Batch{Calls: []client.Call{{ID: "long", Name: "execute_command",
			Arguments: json.RawMessage(`{"command":"echo running; sleep 600"}`)}}}, func(ev client.Event) error {
			switch ev.Type {
			case "tool_progress":
				// The command runs (tool_start comes before its process does: a stop
				// then would cancel a call that never ran, and nothing is killed).
				if strings.Contains(ev.Text, "running") {
					started <- ev.CallID
				}
			case "message":
				msgs <- ev
			}
			return nil
		})
	}()
	var callID string
	select {
	case callID = <-started:
	case err := <-ran:
		t.Fatalf("the stream ended before the call started: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the command did not start")
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.next(t, 30*time.Second, "shutting down: draining in-flight calls")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The drain would last 10 minutes: a minute is only a hang guard.
	if code := p.exit(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after the second signal:\n%s", code, p.log())
	}
	if log := p.log(); !strings.Contains(log, "stop signal again") || !strings.Contains(log, callID) {
		t.Errorf("the log does not name the call the second signal cancelled (%s):\n%s", callID, log)
	}
	select {
	case m := <-msgs:
		if m.ErrorKind != "cancelled" || !strings.Contains(m.Content(), "killed") || m.GoesOn {
			t.Errorf("message after the second signal = %s %q goes_on=%v; want cancelled, the command killed", m.ErrorKind, m.Content(), m.GoesOn)
		}
	default:
		t.Errorf("the stream got no message for the cancelled call (Run: %v)", <-ran)
	}

	// The record was written by the stop (cancelled), not left to the next start's
	// recovery (failed).
	p = startWaitingIn(t, bin, dataDir, "")
	url = "http://" + p.next(t, 60*time.Second, "toolserverd listening")["addr"].(string)
	rec, err := client.New(url).GetCall(ctx, callID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Result == nil || rec.Result.ErrorKind != "cancelled" || len(rec.Result.Content) == 0 || !strings.Contains(rec.Result.Content[0].Text, "killed") {
		t.Errorf("record after the second signal = %s %+v; want cancelled, the command killed", rec.Status, rec.Result)
	}
}
