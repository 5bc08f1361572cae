package server_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestTwoReplicasShareApprovals runs two daemons on one PostgreSQL: a decision taken on
// replica B wakes the stream waiting on replica A (LISTEN/NOTIFY), and the call runs
// exactly once; when nobody waits any more, the deciding replica runs it.
func TestTwoReplicasShareApprovals(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Permissions.Allow = nil
		c.Sessions.WorkdirRoots = []string{shared}
	})
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": shared})["id"].(string)

	// Stream on A; decide on B.
	start := time.Now()
	apr, rest, stop := streamUntilApproval(t, a, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"echo a >> ran.txt"}}]}`)
	defer stop()
	code, _, body := b.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve","actor":"ops"}`)
	if code != 200 {
		t.Fatalf("decide on B: %d %s", code, body)
	}
	m := restMessages(t, <-rest)["x"]
	if m.m["is_error"] != false {
		t.Fatalf("result on A: %s", m.raw)
	}
	t.Logf("approval on B → result on A's stream in %s", time.Since(start))
	code, _, rec := a.do("GET", "/v1/tool-calls/"+m.str("call_id"), nil)
	if code != 200 || !strings.Contains(string(rec), `"succeeded"`) {
		t.Fatalf("record: %s", rec)
	}

	// A's client goes away while waiting; the decision on B runs the call on B.
	apr, _, stop2 := streamUntilApproval(t, a, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"y","name":"execute_command","arguments":{"command":"echo b >> ran.txt"}}]}`)
	stop2()
	time.Sleep(100 * time.Millisecond)
	if code, _, body := b.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("decide: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "the call approved on B ran", func() bool {
		b, _ := os.ReadFile(filepath.Join(shared, "ran.txt"))
		return strings.Count(string(b), "\n") == 2
	})
	time.Sleep(500 * time.Millisecond) // a second run would show up now
	got, _ := os.ReadFile(filepath.Join(shared, "ran.txt"))
	if string(got) != "a\nb\n" {
		t.Fatalf("ran.txt = %q: each call must run exactly once", got)
	}
}

// TestHeldRecordSeenFromAnotherReplica: a read-only call's record waits on its replica
// (calls.record_fold_window) before it is written; another replica asked for the call
// meanwhile waits for it rather than answering 404 for a call that has started.
func TestHeldRecordSeenFromAnotherReplica(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) { c.Calls.RecordFoldWindow = 500 * time.Millisecond })
	id := a.createSession(map[string]any{"available_tools": []string{"block_read"}})["id"].(string)
	out := make(chan []event, 1)
	go func() {
		_, e := a.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"r1","name":"block_read"}]}`)
		out <- e
	}()
	tc := <-a.tools.blockStarts
	code, _, body := b.do("GET", "/v1/tool-calls/"+tc, nil)
	if code != 200 || !strings.Contains(string(body), `"status":"running"`) {
		t.Errorf("GET on replica B of a call running on A: %d %s", code, body)
	}
	close(a.tools.release)
	<-out
	// An id nobody made is still 404 (once the window it names has passed).
	if code, _, _ := b.do("GET", "/v1/tool-calls/tc_nope", nil); code != 404 {
		t.Errorf("unknown call: %d", code)
	}
}

// TestReplicaIDInUse: a second daemon started with the replica_id of one running on
// the same database refuses to start, saying why, and leaves the first one's running
// call alone; once the first has stopped, the id is free.
func TestReplicaIDInUse(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	opts := daemonOpts{store: url, mutate: func(c *config.Config) { c.ReplicaID = "dup" }}
	a := startDaemon(t, opts)
	id := a.createSession(map[string]any{"available_tools": []string{"block"}})["id"].(string)
	go a.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"b","name":"block","arguments":{}}]}`)
	callID := <-a.tools.blockStarts

	cfg := config.Defaults()
	cfg.Store, cfg.ReplicaID, cfg.DataDir, cfg.Auth.Unauthenticated = url, "dup", t.TempDir(), true
	b, err := app.New(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		b.Close()
		t.Fatal("a second daemon with the same replica_id started")
	}
	if !strings.Contains(err.Error(), `replica_id "dup" is in use`) {
		t.Fatalf("error %v does not say the replica id is in use", err)
	}
	if _, _, rec := a.do("GET", "/v1/tool-calls/"+callID, nil); !strings.Contains(string(rec), `"status":"running"`) {
		t.Fatalf("the first daemon's running call after the refused start: %s", rec)
	}
	close(a.tools.release)
	a.stop()
	again := startDaemon(t, opts) // the id is free again
	waitFor(t, 30*time.Second, "the new daemon is ready", func() bool {
		code, _, _ := again.do("GET", "/readyz", nil)
		return code == 200
	})
}

// twoReplicas starts two daemons, replica-a and replica-b, on one fresh PostgreSQL
// database, each configured by mutate (nil: as startDaemon configures them).
func twoReplicas(t testing.TB, mutate func(*config.Config)) (a, b *daemon) {
	t.Helper()
	url := pgtest.URL(t)
	opts := func(replica string) daemonOpts {
		return daemonOpts{store: url, mutate: func(c *config.Config) {
			c.ReplicaID = replica
			if mutate != nil {
				mutate(c)
			}
		}}
	}
	return startDaemon(t, opts("replica-a")), startDaemon(t, opts("replica-b"))
}
