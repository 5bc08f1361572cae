package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestRestartLogNamesRecoveredCalls kills the real binary with calls running and
// pending and approvals pending, starts it again, and reads its start-up log: the
// calls the start marked failed are named (id, tool, session, whether they had
// started; the first 20, then how many more), and so are the approval requests kept.
// Before, the log gave only a count, and an operator could not find the calls.
func TestRestartLogNamesRecoveredCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	bin := buildBinary(t)
	dataDir := t.TempDir()
	d := startProc(t, bin, dataDir)
	ctx := context.Background()
	c := adminClient(t, d.url, dataDir)

	// 23 commands in one batch: the first runs, the others wait for the session's lock
	// (pending, never started).
	bypass, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}, PermissionMode: "bypass"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 23
	calls := make([]client.Call, n)
	for i := range calls {
		calls[i] = client.Call{ID: fmt.Sprint("long", i), Name: "execute_command", Arguments: json.RawMessage(`{"command":"sleep 600"}`)}
	}
	starts := make(chan string, n)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = c.Run(rctx, bypass.ID, "", client.Batch{Calls: calls}, func(ev client.Event) error {
			if ev.Type == "tool_start" {
				starts <- ev.CallID
			}
			return nil
		})
	}()
	ids := map[string]bool{}
	for len(ids) < n {
		select {
		case id := <-starts:
			ids[id] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("%d tool_start events of %d", len(ids), n)
		}
	}
	var running string
	for deadline := time.Now().Add(30 * time.Second); running == ""; {
		page, err := c.ListCalls(ctx, client.CallFilter{Statuses: []string{"running"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range page.Calls {
			if rec.Status == "running" {
				running = rec.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no call running")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Two approval requests left pending.
	asking, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		got := make(chan struct{}, 1)
		actx, acancel := context.WithCancel(ctx)
		go func() {
			_ = c.Run(actx, asking.ID, "", client.Batch{Calls: []client.Call{{ID: fmt.Sprint("ask", i), Name: "execute_command",
				Arguments: json.RawMessage(`{"command":"echo x >> asked.txt"}`)}}}, func(ev client.Event) error {
				if ev.Type == "approval_required" {
					got <- struct{}{}
				}
				return nil
			})
		}()
		select {
		case <-got:
		case <-time.After(30 * time.Second):
			t.Fatal("no approval_required")
		}
		acancel()
	}
	pending, err := c.Approvals(ctx, "pending", 0)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending approvals: %d %v", len(pending), err)
	}

	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Wait()
	_, startLog := testdaemon.ExecStartLog(t, exec.Command(bin, "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json"), "TOOLSERVER_REPLICA_ID=crash-test")

	type line struct {
		Level, Msg string
		Count      int
		Calls      []string
		Approvals  []string
	}
	var abandoned, approvals *line
	for _, raw := range startLog {
		var l line
		if json.Unmarshal([]byte(raw), &l) != nil {
			continue
		}
		switch l.Msg {
		case "calls left unfinished by a previous run were marked failed":
			abandoned = &l
		case "approval requests pending in the store; each call runs once approved":
			approvals = &l
		}
	}
	if abandoned == nil {
		t.Fatalf("no line naming the calls marked failed in the start-up log:\n%s", strings.Join(startLog, "\n"))
	}
	if abandoned.Level != "WARN" || abandoned.Count != n || len(abandoned.Calls) != 21 || abandoned.Calls[20] != "and 3 more" {
		t.Fatalf("the start-up log's failed calls: %+v; want WARN, count %d, 20 named and \"and 3 more\"", *abandoned, n)
	}
	named := strings.Join(abandoned.Calls, "\n")
	want := fmt.Sprintf("%s (execute_command, session %s, was running, may have run partly)", running, bypass.ID)
	if !strings.Contains(named, want) {
		t.Errorf("the start-up log's failed calls do not name the running one as %q:\n%s", want, named)
	}
	for _, s := range abandoned.Calls[:20] {
		id, _, _ := strings.Cut(s, " ")
		if !ids[id] || !strings.Contains(s, "session "+bypass.ID) {
			t.Errorf("the start-up log names %q, not one of the calls left", s)
		}
		if id != running && !strings.HasSuffix(s, "was pending, never ran)") {
			t.Errorf("the start-up log says %q of a call that waited for the session's lock", s)
		}
	}
	if approvals == nil {
		t.Fatalf("no line naming the pending approval requests in the start-up log:\n%s", strings.Join(startLog, "\n"))
	}
	if approvals.Count != 2 || len(approvals.Approvals) != 2 {
		t.Errorf("the start-up log's approvals: %+v; want the 2 pending", *approvals)
	}
	for _, a := range pending {
		if want := fmt.Sprintf("%s for %s (execute_command, session %s)", a.ID, a.CallID, asking.ID); !strings.Contains(strings.Join(approvals.Approvals, "\n"), want) {
			t.Errorf("the start-up log's approvals %q lack %q", approvals.Approvals, want)
		}
	}
}
