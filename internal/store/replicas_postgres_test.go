package store_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestExpireReplicas: the unfinished calls of a replica whose heartbeat is older than
// the lease are failed once, by exactly one of two concurrent sweeps; waiting and
// finished calls, the calls of a live replica and the sweeper's own are untouched.
func TestExpireReplicas(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	ctx := t.Context()
	s1, err := store.OpenPostgres(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s1.Close() })
	s2, err := store.OpenPostgres(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })

	for _, id := range []string{"dead", "gone", "alive", "sweeper-1", "sweeper-2"} {
		if err := s1.Heartbeat(ctx, id, "http://"+id+":8080", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s1.CreateSession(ctx, &store.Session{ID: "ses_1", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	var calls []*store.Call
	add := func(id, owner string, st store.CallStatus) *store.Call {
		c := &store.Call{ID: id, SessionID: "ses_1", Tenant: "t", ToolCallID: id, Name: "x", Status: st, Owner: owner}
		if st.Terminal() {
			c.Result = tool.TextResult("done")
		}
		calls = append(calls, c)
		return c
	}
	add("tc_dead_running", "dead", store.CallRunning)
	add("tc_dead_pending", "dead", store.CallPending)
	add("tc_dead_waiting", "dead", store.CallWaiting)
	add("tc_dead_done", "dead", store.CallSucceeded)
	add("tc_alive_running", "alive", store.CallRunning)
	add("tc_sweeper_running", "sweeper-1", store.CallRunning)
	// Calls that started background jobs, whose output is still open: a dead replica's
	// jobs died with it, whether or not it left calls running ("gone" left none).
	add("tc_dead_job", "dead", store.CallSucceeded).OutputOpen = true
	add("tc_gone_job", "gone", store.CallSucceeded).OutputOpen = true
	add("tc_alive_job", "alive", store.CallSucceeded).OutputOpen = true
	// A replica whose row an older release's sweep deleted while the call's output
	// was open (it never heartbeats here): nothing streams that output any more.
	add("tc_forgotten_job", "forgotten", store.CallSucceeded).OutputOpen = true
	if err := s1.WriteCalls(ctx, calls, nil); err != nil {
		t.Fatal(err)
	}
	// "dead" and "sweeper-1" last heartbeated an hour ago (by the database's clock).
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `UPDATE replicas SET last_seen = now() - interval '1 hour' WHERE id IN ('dead', 'gone', 'sweeper-1')`); err != nil {
		t.Fatal(err)
	}
	r, err := s1.GetReplica(ctx, "alive")
	if err != nil || r.Address != "http://alive:8080" {
		t.Fatalf("GetReplica: %+v %v", r, err)
	}
	if _, err := s1.GetReplica(ctx, "nobody"); err == nil {
		t.Fatal("GetReplica of an unknown id succeeded")
	}

	reason := func(owner string, started bool) *tool.Result {
		if !started {
			return tool.ErrorResult(tool.KindFailed, "replica %s never ran the call", owner)
		}
		return tool.ErrorResult(tool.KindFailed, "replica %s stopped", owner)
	}
	var (
		wg  sync.WaitGroup
		got [2][]store.ExpiredCall
	)
	for i, s := range []*store.Postgres{s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if got[i], err = s.ExpireReplicas(ctx, []string{"sweeper-1", "sweeper-2"}[i], time.Minute, reason); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var ids []string
	for _, g := range got {
		for _, c := range g {
			if !strings.HasPrefix(c.ID, "tc_"+strings.Split(c.Owner, "-")[0]+"_") {
				t.Errorf("expired %s of %s", c.ID, c.Owner)
			}
			ids = append(ids, c.ID)
		}
	}
	sort.Strings(ids)
	// sweeper-2 also sees sweeper-1 as stale; sweeper-1 never expires itself.
	want := []string{"tc_dead_pending", "tc_dead_running", "tc_sweeper_running"}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("expired %v (sweep 1: %v, sweep 2: %v), want each of %v exactly once", ids, got[0], got[1], want)
	}
	for _, c := range got[0] {
		if c.Owner == "sweeper-1" {
			t.Fatalf("sweeper-1 expired its own call %s", c.ID)
		}
	}
	check := func(id string, st store.CallStatus, text string) {
		t.Helper()
		c, err := s1.GetCall(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != st {
			t.Fatalf("%s is %s, want %s", id, c.Status, st)
		}
		if text != "" && (c.Result == nil || !strings.Contains(c.Result.Content[0].Text, text) || c.ErrorKind != tool.KindFailed || c.FinishedAt == nil) {
			t.Fatalf("%s result %+v kind %q", id, c.Result, c.ErrorKind)
		}
	}
	check("tc_dead_running", store.CallFailed, "replica dead stopped")
	check("tc_dead_pending", store.CallFailed, "replica dead never ran the call")
	check("tc_dead_waiting", store.CallWaiting, "")
	check("tc_dead_done", store.CallSucceeded, "")
	check("tc_alive_running", store.CallRunning, "")
	for id, open := range map[string]bool{"tc_dead_job": false, "tc_gone_job": false, "tc_alive_job": true, "tc_forgotten_job": false} {
		c, err := s1.GetCall(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if c.OutputOpen != open || c.Status != store.CallSucceeded {
			t.Errorf("%s: output open %v, status %s; want %v, succeeded", id, c.OutputOpen, c.Status, open)
		}
	}

	// A later sweep finds nothing more.
	again, err := s1.ExpireReplicas(ctx, "sweeper-2", time.Minute, reason)
	if err != nil || len(again) != 0 {
		t.Fatalf("second sweep: %v %v", again, err)
	}
}

// TestSessionLocksAcrossPools: two lock pools (two replicas) exclude each other on one
// session, not on two. (A holder that dies releases its lock with its connection:
// cmd/toolserverd's replica test kills one.)
func TestSessionLocksAcrossPools(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	ctx := t.Context()
	a, err := store.NewPGSessionLocks(ctx, u, 2, "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err := store.NewPGSessionLocks(ctx, u, 2, "replica-b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)

	unlockA, err := a.LockSession(ctx, "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	// Another session is not blocked.
	unlockOther, err := b.LockSession(ctx, "ses_2")
	if err != nil {
		t.Fatal(err)
	}
	unlockOther()
	// The same session is: b waits until a unlocks, or its context ends.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.LockSession(short, "ses_1")
	cancel()
	if err == nil {
		t.Fatal("b took ses_1 while a held it")
	}
	got := make(chan func(), 1)
	go func() {
		u, err := b.LockSession(ctx, "ses_1")
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- u
	}()
	unlockA()
	unlockB, ok := <-got
	if !ok {
		t.FailNow()
	}
	// Unlocked, a takes it again.
	unlockB()
	unlockAgain, err := a.LockSession(ctx, "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	unlockAgain()
}

// openPostgresWithReplica opens a fresh PostgreSQL store in which replica has
// heartbeated (at http://a:8080), so rows it owns may be recorded.
func openPostgresWithReplica(t *testing.T, replica string) *store.Postgres {
	t.Helper()
	s := openPostgres(t)
	if err := s.Heartbeat(t.Context(), replica, "http://a:8080", time.Time{}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJobOwners: a job's owner is found by its id; an unknown id is ErrNotFound, a
// record with a missing field is ErrInvalid, and the row outlives its replica's row
// once the sweep forgets that replica (its job tools' callers are then told the job
// ran there and ended with it, not that it never existed).
func TestJobOwners(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openPostgresWithReplica(t, "replica-a")
	want := &store.Job{ID: "job_1", SessionID: "ses_1", Tenant: "t", Owner: "replica-a"}
	if err := s.RecordJob(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetJob(ctx, "job_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.SessionID != want.SessionID || got.Tenant != want.Tenant || got.Owner != want.Owner || got.CreatedAt.IsZero() {
		t.Fatalf("GetJob = %+v, want %+v", got, want)
	}
	if _, err := s.GetJob(ctx, "job_2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	if err := s.RecordJob(ctx, &store.Job{ID: "job_3", SessionID: "ses_1", Tenant: "t"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("no owner: %v", err)
	}
	if err := s.LeaveReplica(ctx, "replica-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ExpireReplicas(ctx, "replica-b", time.Second, func(string, bool) *tool.Result { return tool.ErrorResult(tool.KindFailed, "gone") }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetReplica(ctx, "replica-a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the replica that left, after the sweep: %v; want it forgotten", err)
	}
	if got, err := s.GetJob(ctx, "job_1"); err != nil || got.Owner != "replica-a" {
		t.Fatalf("the job of the forgotten replica: %+v, %v; want its row kept", got, err)
	}
}

// TestExpireReplicasFreesTheirSessionLocks: a replica that stops answering without
// closing its connections (a frozen process, a lost node) keeps its session locks for
// as long as PostgreSQL keeps those connections. Once its lease runs out, the sweep
// that fails its calls also closes its lock connections, so that the session's next
// unsafe call on a survivor runs; the survivors' own locks are untouched.
func TestExpireReplicasFreesTheirSessionLocks(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	ctx := t.Context()
	s, err := store.OpenPostgres(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	frozen, err := store.NewPGSessionLocks(ctx, u, 2, "frozen")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(frozen.Close)
	alive, err := store.NewPGSessionLocks(ctx, u, 2, "alive")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(alive.Close)
	for _, id := range []string{"frozen", "alive"} {
		if err := s.Heartbeat(ctx, id, "http://"+id+":8080", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateSession(ctx, &store.Session{ID: "ses_1", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteCalls(ctx, []*store.Call{{ID: "tc_frozen", SessionID: "ses_1", Tenant: "t", ToolCallID: "x", Name: "x",
		Status: store.CallRunning, Owner: "frozen"}}, nil); err != nil {
		t.Fatal(err)
	}
	// The frozen replica holds ses_1's lock for its running call and never lets go
	// (its unlock, when the test ends, finds the connection closed).
	frozenUnlock, err := frozen.LockSession(ctx, "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	defer frozenUnlock()
	heldByAlive, err := alive.LockSession(ctx, "ses_2")
	if err != nil {
		t.Fatal(err)
	}
	defer heldByAlive()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := alive.LockSession(short, "ses_1"); err == nil {
		t.Fatal("ses_1's lock was free while the frozen replica held it")
	}
	cancel()

	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// Its last heartbeat was a second ago, after it opened its lock connection, and
	// its lease is half a second.
	time.Sleep(1500 * time.Millisecond)
	if _, err := conn.Exec(ctx, `UPDATE replicas SET last_seen = now() - interval '1 second' WHERE id = 'frozen'`); err != nil {
		t.Fatal(err)
	}
	expired, err := s.ExpireReplicas(ctx, "alive", 500*time.Millisecond, func(owner string, started bool) *tool.Result {
		return tool.ErrorResult(tool.KindFailed, "%s stopped", owner)
	})
	if err != nil || len(expired) != 1 {
		t.Fatalf("ExpireReplicas = %v, %v", expired, err)
	}
	within, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	unlock, err := alive.LockSession(within, "ses_1")
	if err != nil {
		t.Fatalf("ses_1's lock after the frozen replica's calls were failed: %v", err)
	}
	unlock()
	// The survivor's own lock connection is still there, still holding ses_2.
	other, err := store.NewPGSessionLocks(ctx, u, 1, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	short, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := other.LockSession(short, "ses_2"); err == nil {
		t.Fatal("the survivor's lock on ses_2 was released too")
	}
}

// TestLeaveReplica: a replica that left (stopped cleanly) reads as silent for longer
// than any lease at once; the next sweep fails its unfinished calls, as a dead
// replica's, and leaves its finished ones; once nothing of it is unfinished its row
// is forgotten. An id that never heartbeated cannot leave.
func TestLeaveReplica(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	ctx := t.Context()
	s, err := store.OpenPostgres(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, id := range []string{"leaver", "sweeper"} {
		if err := s.Heartbeat(ctx, id, "http://"+id+":8080", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateSession(ctx, &store.Session{ID: "ses_1", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteCalls(ctx, []*store.Call{
		{ID: "tc_left_running", SessionID: "ses_1", Tenant: "t", ToolCallID: "a", Name: "x", Status: store.CallRunning, Owner: "leaver"},
		{ID: "tc_left_done", SessionID: "ses_1", Tenant: "t", ToolCallID: "b", Name: "x", Status: store.CallSucceeded, Owner: "leaver", Result: tool.TextResult("done")},
	}, nil); err != nil {
		t.Fatal(err)
	}
	reason := func(owner string, started bool) *tool.Result {
		return tool.ErrorResult(tool.KindFailed, "replica %s stopped", owner)
	}
	const lease = time.Hour
	if got, err := s.ExpireReplicas(ctx, "sweeper", lease, reason); err != nil || len(got) != 0 {
		t.Fatalf("sweep before the leave: %v %v", got, err)
	}
	if err := s.LeaveReplica(ctx, "leaver"); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetReplica(ctx, "leaver")
	if err != nil || r.Silent < 24*time.Hour {
		t.Fatalf("the replica that left: %+v %v; want silent for longer than any lease", r, err)
	}
	got, err := s.ExpireReplicas(ctx, "sweeper", lease, reason)
	if err != nil || len(got) != 1 || got[0].ID != "tc_left_running" || got[0].Owner != "leaver" {
		t.Fatalf("sweep after the leave: %v %v; want tc_left_running failed", got, err)
	}
	for id, want := range map[string]store.CallStatus{"tc_left_running": store.CallFailed, "tc_left_done": store.CallSucceeded} {
		if c, err := s.GetCall(ctx, id); err != nil || c.Status != want {
			t.Errorf("%s: %+v %v; want %s", id, c, err, want)
		}
	}
	if _, err := s.GetReplica(ctx, "leaver"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the row of a replica that left with nothing unfinished: %v; want it forgotten", err)
	}
	if _, err := s.GetReplica(ctx, "sweeper"); err != nil {
		t.Errorf("the sweeper's own row: %v", err)
	}
	if err := s.LeaveReplica(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LeaveReplica of an id that never heartbeated: %v; want ErrNotFound", err)
	}
}
