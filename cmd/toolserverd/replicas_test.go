package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// startReplica runs the binary as one replica of a PostgreSQL-backed cluster.
func startReplica(t *testing.T, bin, store, id, workdirRoot string) *daemonProc {
	t.Helper()
	return startProcWith(t, exec.Command(bin, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--store", store, "--log-format", "json"),
		"TOOLSERVER_REPLICA_ID="+id, "TOOLSERVER_AUTH_UNAUTHENTICATED=true", "TOOLSERVER_CLUSTER_LEASE=3s",
		"TOOLSERVER_PERMISSIONS_ALLOW=execute_command", "TOOLSERVER_SESSIONS_WORKDIR_ROOTS="+workdirRoot)
}

// runUntilStart posts one execute_command call and returns its daemon id once it
// started; the rest of the stream (its message) arrives on the returned channel.
func runUntilStart(t *testing.T, c *client.Client, sessionID, command string) (string, <-chan client.Event) {
	t.Helper()
	return startCall(t, c, sessionID, client.Call{ID: "x", Name: "execute_command", Arguments: json.RawMessage(fmt.Sprintf(`{"command":%q}`, command))})
}

// startCall posts call alone in a batch and returns its daemon id once it started;
// the rest of the stream (its message) arrives on the returned channel. The stream
// ends with the daemon or the call.
func startCall(t *testing.T, c *client.Client, sessionID string, call client.Call) (string, <-chan client.Event) {
	t.Helper()
	started := make(chan string, 1)
	msg := make(chan client.Event, 1)
	go func() {
		defer close(msg)
		_ = c.Run(context.Background(), sessionID, "", client.Batch{Calls: []client.Call{call}}, func(ev client.Event) error {
			switch ev.Type {
			case "tool_start":
				started <- ev.CallID
			case "message":
				msg <- ev
			}
			return nil
		})
	}()
	select {
	case id := <-started:
		return id, msg
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not start")
	}
	return "", nil
}

// TestReplicaLossFailsItsCalls runs two replicas of the real binary on one
// PostgreSQL. Replica A runs a long command and is killed with SIGKILL (no drain, no
// record written); replica B, the survivor, marks A's call failed with a reason once
// A's lease (3s here) runs out, while B's own long call, running all along, finishes
// untouched. A's kill also releases the session lock its command held: an unsafe call
// of the same session then runs on B.
func TestReplicaLossFailsItsCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	store := pgtest.URL(t)
	bin := buildBinary(t)
	shared := t.TempDir()
	a := startReplica(t, bin, store, "replica-a", shared)
	b := startReplica(t, bin, store, "replica-b", shared)
	ctx := context.Background()
	ca, cb := client.New(a.url), client.New(b.url)

	s1, err := ca.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}, Workdir: shared})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := cb.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}, Workdir: shared})
	if err != nil {
		t.Fatal(err)
	}
	lost, _ := runUntilStart(t, ca, s1.ID, "sleep 60")
	// B's call spans A's death and several of B's sweeps (every lease/3).
	healthy, healthyMsg := runUntilStart(t, cb, s2.ID, "while [ ! -e a-expired ]; do sleep 0.1; done; sleep 3; echo healthy")
	// tool_start comes before the call takes the session lock and records that it
	// runs: killed before that, A's call never ran and is failed as not started.
	// This test is about a call that was running.
	for _, id := range []string{lost, healthy} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			rec, err := cb.GetCall(ctx, id)
			if err == nil && rec.Status == "running" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("call %s is not recorded running: %+v %v", id, rec, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	killed := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()

	var rec *client.CallRecord
	deadline := time.Now().Add(60 * time.Second)
	for {
		if rec, err = cb.GetCall(ctx, lost); err != nil {
			t.Fatal(err)
		}
		if rec.Status != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed replica's call is still running %s after the kill", time.Since(killed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the killed replica's call was marked %s %s after SIGKILL (lease 3s)", rec.Status, time.Since(killed).Round(time.Millisecond))
	if rec.Status != "failed" || rec.Result == nil || rec.Result.ErrorKind != "failed" || len(rec.Result.Content) == 0 ||
		!strings.Contains(rec.Result.Content[0].Text, "replica replica-a stopped answering") || !strings.Contains(rec.Result.Content[0].Text, "may have run partly") {
		t.Fatalf("the killed replica's call: %+v %+v", rec, rec.Result)
	}
	if err := os.WriteFile(shared+"/a-expired", nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// The session lock A's command held died with A's connection.
	_, after := runUntilStart(t, cb, s1.ID, "echo after")
	select {
	case m, ok := <-after:
		if !ok || m.IsError || !strings.Contains(m.Content(), "after") {
			t.Fatalf("unsafe call on B after A's death: %+v", m)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("an unsafe call of A's session never ran on B: A's session lock was not released")
	}

	select {
	case m, ok := <-healthyMsg:
		if !ok || m.IsError || !strings.Contains(m.Content(), "healthy") {
			t.Fatalf("the survivor's own call: %+v", m)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the survivor's own call never finished")
	}
	if rec, err := cb.GetCall(ctx, healthy); err != nil || rec.Status != "succeeded" {
		t.Fatalf("the survivor's call record: %+v %v", rec, err)
	}
}

// adminClient is a client of the daemon at url with the admin key its first start
// wrote in dataDir.
func adminClient(t *testing.T, url, dataDir string) *client.Client {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(dataDir, "admin.key"))
	if err != nil {
		t.Fatalf("the first start wrote no admin key: %v", err)
	}
	return client.New(url, client.WithAPIKey(strings.TrimSpace(string(key))))
}
