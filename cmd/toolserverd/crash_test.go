package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// daemonProc is the real toolserverd binary running as a child process.
type daemonProc struct {
	cmd *exec.Cmd
	url string
}

func buildBinary(t *testing.T) string { return testdaemon.Build(t) }

func startProc(t *testing.T, bin, dataDir string) *daemonProc {
	t.Helper()
	return startProcWith(t, exec.Command(bin, "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json"), "TOOLSERVER_REPLICA_ID=crash-test")
}

// startProcWith starts cmd with env added to the test's environment and waits until
// it listens.
func startProcWith(t *testing.T, cmd *exec.Cmd, env ...string) *daemonProc {
	t.Helper()
	return &daemonProc{cmd: cmd, url: testdaemon.Exec(t, cmd, env...)}
}

// TestPendingApprovalsSurviveKill starts the real binary, leaves approvals pending,
// kills it with SIGKILL, starts it again, decides, and checks that every approved call
// ran exactly once and every denied one never.
func TestPendingApprovalsSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	bin := buildBinary(t)
	dataDir := t.TempDir()
	d := startProc(t, bin, dataDir)
	ctx := context.Background()
	// A zero-configuration start requires a key: the first start wrote one.
	key, err := os.ReadFile(filepath.Join(dataDir, "admin.key"))
	if err != nil {
		t.Fatalf("the first start wrote no admin key: %v", err)
	}
	if _, err := client.New(d.url).Approvals(ctx, "pending", 0); err == nil {
		t.Fatal("a request without a key was served")
	}
	c := client.New(d.url, client.WithAPIKey(strings.TrimSpace(string(key))))
	sess, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	callIDs := make([]string, n)
	for i := range n {
		got := make(chan string, 1)
		rctx, cancel := context.WithCancel(ctx)
		go func() {
			_ = c.Run(rctx, sess.ID, "", client.Batch{Calls: []client.Call{{ID: fmt.Sprint("c", i), Name: "execute_command",
				Arguments: json.RawMessage(fmt.Sprintf(`{"command":"echo call-%d >> ran.txt"}`, i))}}}, func(ev client.Event) error {
				if ev.Type == "approval_required" {
					got <- ev.CallID
				}
				return nil
			})
		}()
		select {
		case callIDs[i] = <-got:
		case <-time.After(30 * time.Second):
			t.Fatal("no approval_required")
		}
		cancel()
	}
	pending, err := c.Approvals(ctx, "pending", 0)
	if err != nil || len(pending) != n {
		t.Fatalf("pending before the kill: %d %v", len(pending), err)
	}

	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Wait()

	d = startProc(t, bin, dataDir)
	c = client.New(d.url, client.WithAPIKey(strings.TrimSpace(string(key))))
	pending, err = c.Approvals(ctx, "pending", 0)
	if err != nil || len(pending) != n {
		t.Fatalf("pending after the restart: %d %v", len(pending), err)
	}
	sort.Slice(pending, func(i, j int) bool { return pending[i].CallID < pending[j].CallID })
	denied := ""
	for i, a := range pending {
		dec := client.Decision{Decision: "approve"}
		if i == 0 {
			dec, denied = client.Decision{Decision: "deny", Reason: "not this one"}, a.CallID
		}
		if _, err := c.Decide(ctx, a.ID, dec); err != nil {
			t.Fatal(err)
		}
		// Another decision after the restart is still refused (the same one sent
		// again is a retry, answered with the request as decided).
		other := client.Decision{Decision: "deny", Reason: "changed my mind"}
		if dec.Decision == "deny" {
			other = client.Decision{Decision: "approve"}
		}
		if _, err := c.Decide(ctx, a.ID, other); err == nil {
			t.Fatal("a second decision was accepted")
		}
	}
	for _, id := range callIDs {
		deadline := time.Now().Add(30 * time.Second)
		for {
			rec, err := c.GetCall(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status == "succeeded" || rec.Status == "failed" {
				if (id == denied) != (rec.Status == "failed") {
					t.Fatalf("call %s ended %s", id, rec.Status)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("call %s still %s after the decision", id, rec.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	b, _ := os.ReadFile(filepath.Join(sess.Workdir, "ran.txt"))
	ran := strings.Fields(string(b))
	sort.Strings(ran)
	if len(ran) != n-1 {
		t.Fatalf("ran.txt = %q: want each approved call exactly once and the denied one never", ran)
	}
	for i := 1; i < len(ran); i++ {
		if ran[i] == ran[i-1] {
			t.Fatalf("a call ran twice: %q", ran)
		}
	}
}

// TestSecondDaemonOnOneDataDirRefused starts the real binary, leaves a command running
// in it, and starts a second one on the same data dir (SQLite): the second must
// refuse to start, saying why, rather than serve from the same database and mark the
// first one's running call failed as if it were left by a crashed run (same replica
// id), while the first one still runs it and then answers its client succeeded.
func TestSecondDaemonOnOneDataDirRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
	dataDir := t.TempDir()
	d := startProc(t, bin, dataDir)
	ctx := context.Background()
	c := adminClient(t, d.url, dataDir)
	sess, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}, PermissionMode: "bypass"})
	if err != nil {
		t.Fatal(err)
	}
	callID, _ := runUntilStart(t, c, sess.ID, "sleep 600")
	for deadline := time.Now().Add(30 * time.Second); ; {
		rec, err := c.GetCall(ctx, callID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call is %s, not running", rec.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}

	second := exec.Command(bin, "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json")
	second.Env = append(os.Environ(), "TOOLSERVER_REPLICA_ID=crash-test")
	stderr, err := second.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Process.Kill(); _ = second.Wait() })
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	listening := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), `"toolserverd listening"`) {
			listening = true
			break
		}
	}
	if listening {
		_ = second.Process.Kill()
	}
	werr := second.Wait()
	rec, err := c.GetCall(ctx, callID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != "running" {
		t.Errorf("the first daemon's running call is %s after a second daemon started on its data dir", rec.Status)
	}
	if listening {
		t.Fatalf("a second daemon started on the same data dir:\n%s", log.String())
	}
	if werr == nil || !strings.Contains(log.String(), "in use by another toolserverd") {
		t.Fatalf("the second daemon exited with %v, want a refusal naming the other toolserverd:\n%s", werr, log.String())
	}
}
