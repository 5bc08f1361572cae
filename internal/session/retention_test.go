package session

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// runEcho runs one call of echo in sess and waits for its record to be final.
func (e *evictEnv) runEcho(t *testing.T, sess *Session) {
	t.Helper()
	ctx := context.Background()
	p, err := e.x.Plan(sess, Batch{Calls: []CallRequest{{ToolCallID: "c1", Name: "echo"}}})
	if err != nil {
		t.Fatal(err)
	}
	e.x.Execute(ctx, p, func(Event) {})
	deadline := time.Now().Add(10 * time.Second)
	for {
		calls, err := e.st.ListCalls(ctx, sess.ID, store.CallPage{})
		if err == nil && len(calls) == 1 && calls[0].Status.Terminal() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call's record is not final: %v, %v", calls, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestRetentionDeletesUnusedSessions: past the retention, a session nothing used goes
// from the store with its call records and the workspace directory the daemon made
// for it; one that named its own workdir goes too, but its workdir and the files in
// it stay; a live session something holds stays whole.
func TestRetentionDeletesUnusedSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	checkout := filepath.Join(root, "checkout")
	if err := mkdirs(checkout); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkout, "main.go"), []byte("package main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEvictEnv(t, Config{WorkdirRoots: []string{root}})
	const keep = time.Hour
	e.m.UseRetention(e.st, keep)

	old, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	oldDir := old.Info.Workdir
	if filepath.Dir(oldDir) != e.m.cfg.WorkspaceDir {
		t.Fatalf("workspace %s is not under %s", oldDir, e.m.cfg.WorkspaceDir)
	}
	if err := os.WriteFile(filepath.Join(oldDir, "notes.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.runEcho(t, old)
	user, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}, Workdir: checkout})
	if err != nil {
		t.Fatal(err)
	}
	e.runEcho(t, user)
	held, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	_, unsubscribe := held.Subscribe(1) // a client follows its events: live, in use
	defer unsubscribe()

	// Within the retention nothing goes.
	if n, calls, err := e.m.DeleteUnused(ctx, time.Now().Add(keep/2)); n != 0 || calls != 0 || err != nil {
		t.Fatalf("DeleteUnused within the retention = %d, %d, %v", n, calls, err)
	}
	n, calls, err := e.m.DeleteUnused(ctx, time.Now().Add(2*keep))
	if err != nil || n != 2 || calls != 2 {
		t.Fatalf("DeleteUnused = %d sessions, %d calls, %v; want 2, 2", n, calls, err)
	}
	for _, s := range []*Session{old, user} {
		if _, err := e.st.GetSession(ctx, s.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s still stored: %v", s.ID, err)
		}
		if cs, err := e.st.ListCalls(ctx, s.ID, store.CallPage{}); err != nil || len(cs) != 0 {
			t.Errorf("%s: %d call records left (%v)", s.ID, len(cs), err)
		}
		if _, err := e.m.Get(ctx, "t1", s.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%s) after deletion: %v, want ErrNotFound", s.ID, err)
		}
	}
	if exists(t, oldDir) {
		t.Errorf("the daemon's workspace %s was not removed", oldDir)
	}
	if !exists(t, filepath.Join(checkout, "main.go")) {
		t.Error("the client's own workdir lost its files")
	}
	if _, err := e.st.GetSession(ctx, held.ID); err != nil {
		t.Errorf("the held session was deleted: %v", err)
	}
	if !exists(t, held.Info.Workdir) || !e.isLive(held.ID) {
		t.Error("the held session lost its workspace or left memory")
	}
	// Let go of it: the next sweep past the retention takes it.
	unsubscribe()
	if n, _, err := e.m.DeleteUnused(ctx, time.Now().Add(2*keep)); err != nil || n != 1 || exists(t, held.Info.Workdir) {
		t.Fatalf("after unsubscribing: deleted %d (%v), workspace there %v", n, err, exists(t, held.Info.Workdir))
	}
}

// TestRetentionOtherReplicaUse: two managers over one store are two replicas. A
// session stored long ago that one replica loads (a use, recorded in the store) is
// not deleted by the other's sweep; left alone for the retention, it is, and the
// first replica's next use finds it gone.
func TestRetentionOtherReplicaUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEvictEnv(t, Config{})
	const keep = time.Hour
	e.m.UseRetention(e.st, keep)
	tm := toolmgr.New()
	tm.MustRegister(named{"echo", "builtin"})
	other, err := NewManager(Config{WorkspaceDir: e.m.cfg.WorkspaceDir}, e.st, tm)
	if err != nil {
		t.Fatal(err)
	}
	other.UseRetention(e.st, keep)

	spec, _ := json.Marshal(storedSpec{Spec: Spec{AvailableTools: []string{"echo"}}})
	long := time.Now().Add(-3 * keep).UTC()
	if err := e.st.CreateSession(ctx, &store.Session{ID: "ses_old", Tenant: "t1", Spec: spec, CreatedAt: long, UpdatedAt: long}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Get(ctx, "t1", "ses_old"); err != nil {
		t.Fatal(err)
	}
	if n, _, err := e.m.DeleteUnused(ctx, time.Now()); err != nil || n != 0 {
		t.Fatalf("a session the other replica just used was deleted: %d, %v", n, err)
	}
	rec, err := e.st.GetSession(ctx, "ses_old")
	if err != nil || time.Since(rec.UpdatedAt) > time.Minute {
		t.Fatalf("the use was not recorded: %v, %v", rec, err)
	}
	// Nobody uses it for the retention (and the touch interval).
	n, _, err := e.m.DeleteUnused(ctx, time.Now().Add(keep+touchEvery(keep)+time.Second))
	if err != nil || n != 1 {
		t.Fatalf("DeleteUnused = %d, %v; want it deleted", n, err)
	}
	// The other replica still holds it in memory; its stored time is old to it (as it
	// would be after the retention): the next use learns it is gone.
	s, _ := func() (*Session, bool) {
		other.mu.Lock()
		defer other.mu.Unlock()
		s, ok := other.live["ses_old"]
		return s, ok
	}()
	s.mu.Lock()
	s.storedUsed = time.Now().Add(-2 * keep)
	s.mu.Unlock()
	if _, err := other.Get(ctx, "t1", "ses_old"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get on the other replica after deletion: %v, want ErrNotFound", err)
	}
	if other.Live() != 0 {
		t.Errorf("the deleted session stayed in the other replica's memory")
	}
}

// TestRetentionSkipsLoading: a session Get is loading is not deleted; one being
// deleted makes Get wait and then not find it.
func TestRetentionSkipsLoading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEvictEnv(t, Config{IdleTimeout: time.Minute})
	const keep = time.Hour
	e.m.UseRetention(e.st, keep)
	sess, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.m.Sweep(ctx, time.Now().Add(time.Hour)); n != 1 || err != nil {
		t.Fatalf("evicted %d, %v", n, err)
	}
	later := time.Now().Add(3 * keep)
	e.m.mu.Lock()
	e.m.loading[sess.ID]++ // as Get does between reading the record and admitting it
	e.m.mu.Unlock()
	if n, _, err := e.m.DeleteUnused(ctx, later); n != 0 || err != nil {
		t.Fatalf("a session being loaded was deleted: %d, %v", n, err)
	}
	e.m.loaded(sess.ID)
	if !exists(t, sess.Info.Workdir) {
		t.Fatal("workspace removed while loading")
	}

	// Many Gets race one sweep: each either loaded the session (then, while it is
	// live, it is kept, workspace and all) or found it deleted; never a live session
	// without its record or workspace. (The sweep runs hours ahead of the clock, so
	// it may also evict a session a Get has just loaded, as idle for hours, and then
	// delete it: a session no longer live may be gone.)
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, results[i] = e.m.Get(ctx, "t1", sess.ID)
		}()
	}
	deleted, _, err := e.m.DeleteUnused(ctx, later)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	_, stErr := e.st.GetSession(ctx, sess.ID)
	for _, r := range results {
		switch {
		case r == nil && e.isLive(sess.ID) && (stErr != nil || !exists(t, sess.Info.Workdir)):
			t.Fatalf("a Get got the session and it is live, but it was deleted: store %v", stErr)
		case r != nil && !errors.Is(r, ErrNotFound):
			t.Fatalf("Get: %v", r)
		}
	}
	if (deleted == 1) != errors.Is(stErr, store.ErrNotFound) {
		t.Fatalf("sweep says %d deleted, store says %v", deleted, stErr)
	}
}

// TestRetentionKeepsAJobsSessionAfterTheJob: a session whose sandbox ran a job is in
// use while the job runs, whenever it was last requested; when the job ends, its
// output stays readable for the retention (as eviction keeps it for the idle timeout),
// rather than going with the session's sandbox at the next sweep. Eviction off
// (sessions.idle_timeout 0): only retention lets the session go.
func TestRetentionKeepsAJobsSessionAfterTheJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEvictEnv(t, Config{})
	const keep = time.Hour
	e.m.UseRetention(e.st, keep)
	sb, err := sandbox.NewManager(sandbox.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Shutdown(context.Background()) })
	e.m.UseResources(sb)
	sess, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	box, err := sb.For(sess.Info)
	if err != nil {
		t.Fatal(err)
	}
	job, err := box.Start(ctx, sandbox.Cmd{Command: "echo built; sleep 60", Timeout: sandbox.NoTimeout})
	if err != nil {
		t.Fatal(err)
	}
	sess.mu.Lock()
	sess.lastUsed = time.Now().Add(-2 * keep) // last requested long ago; the job runs on
	sess.mu.Unlock()
	if n, _, err := e.m.DeleteUnused(ctx, time.Now()); n != 0 || err != nil || !e.isLive(sess.ID) {
		t.Fatalf("a session whose sandbox runs a job was deleted or evicted (%d, %v)", n, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if out, _, _ := job.Tail("stdout", 10); strings.Contains(string(out), "built") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job wrote nothing")
		}
	}
	job.Kill()
	if _, err := job.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The next sweep, a moment after the job ended.
	if n, _, err := e.m.DeleteUnused(ctx, time.Now()); n != 0 || err != nil {
		t.Fatalf("DeleteUnused = %d, %v", n, err)
	}
	if !e.isLive(sess.ID) {
		t.Fatal("the session left memory, and its sandbox with the job's output, the moment its job ended")
	}
	if cur, err := sb.For(sess.Info); err != nil {
		t.Fatal(err)
	} else if j, err := cur.Job(job.ID()); err != nil {
		t.Fatalf("the finished job is gone with its output: %v", err)
	} else if out, _, err := j.Tail("stdout", 10); err != nil || !strings.Contains(string(out), "built") {
		t.Fatalf("the finished job's output = %q, %v", out, err)
	}
	// Unused for the retention after the job: it goes.
	if n, _, err := e.m.DeleteUnused(ctx, time.Now().Add(keep+touchEvery(keep)+time.Minute)); n != 1 || err != nil {
		t.Fatalf("DeleteUnused past the retention = %d, %v; want the session deleted", n, err)
	}
}

// TestRetentionKeepsANamedWorkdirInTheWorkspaceDir: with a workdir root that holds
// the daemon's workspace directory (a root such as /srv with data_dir under it), a
// session can name another session's workspace as its workdir, the one GET
// /v1/sessions showed. Retention of the first session must not remove the directory
// a live session, of another tenant here, works in.
func TestRetentionKeepsANamedWorkdirInTheWorkspaceDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEvictEnv(t, Config{})
	e.m.cfg.WorkdirRoots = []string{filepath.Dir(e.m.cfg.WorkspaceDir)}
	const keep = time.Hour
	e.m.UseRetention(e.st, keep)
	old, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	user, _, err := e.m.Create(ctx, "t2", Spec{AvailableTools: []string{"echo"}, Workdir: old.Info.Workdir})
	if err == nil {
		if err := os.WriteFile(filepath.Join(user.Info.Workdir, "work.txt"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, stop := user.Subscribe(1) // in use
		defer stop()
	} else if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Create naming another session's workspace: %v, want it refused (ErrInvalid) or kept", err)
	}
	if n, _, err := e.m.DeleteUnused(ctx, time.Now().Add(2*keep)); err != nil || n != 1 {
		t.Fatalf("DeleteUnused = %d, %v; want the unused session deleted", n, err)
	}
	if user != nil && !exists(t, filepath.Join(user.Info.Workdir, "work.txt")) {
		t.Fatalf("the workdir %s of a live session of another tenant was removed", user.Info.Workdir)
	}
}

// TestRetentionOfTheLongestDuration: a retention of the longest duration there is
// ("2562047h", written to mean forever) keeps every session: the cutoff (the
// retention and the touch interval before now) must not wrap around to the future.
func TestRetentionOfTheLongestDuration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEvictEnv(t, Config{})
	forever, err := time.ParseDuration("2562047h")
	if err != nil {
		t.Fatal(err)
	}
	e.m.UseRetention(e.st, forever)
	spec, _ := json.Marshal(storedSpec{Spec: Spec{AvailableTools: []string{"echo"}}})
	now := time.Now().UTC()
	if err := e.st.CreateSession(ctx, &store.Session{ID: "ses_recent", Tenant: "t1", Spec: spec, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if n, _, err := e.m.DeleteUnused(ctx, time.Now()); n != 0 || err != nil {
		t.Fatalf("DeleteUnused = %d, %v; want nothing deleted", n, err)
	}
	if _, err := e.st.GetSession(ctx, "ses_recent"); err != nil {
		t.Fatalf("a session stored a moment ago was deleted: %v", err)
	}
}

// TestRetentionEvictionIsNoUse: evicting a session writes its tool selection into its
// stored spec; that write is not a use. A session last used before the retention goes
// in the sweep that evicts it, instead of living a second retention from the eviction.
func TestRetentionEvictionIsNoUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEvictEnv(t, Config{})
	const keep = time.Hour
	spec, _ := json.Marshal(storedSpec{Spec: Spec{AvailableTools: []string{"echo", "other"}}})
	long := time.Now().Add(-3 * keep).UTC()
	if err := e.st.CreateSession(ctx, &store.Session{ID: "ses_sel", Tenant: "t1", Spec: spec, CreatedAt: long, UpdatedAt: long}); err != nil {
		t.Fatal(err)
	}
	// Loaded before retention is on (so not touched), used last two retentions ago,
	// with a narrowed tool list not saved yet.
	sess, err := e.m.Get(ctx, "t1", "ses_sel")
	if err != nil {
		t.Fatal(err)
	}
	sess.Narrow([]string{"echo"})
	sess.mu.Lock()
	sess.lastUsed = time.Now().Add(-2 * keep)
	sess.mu.Unlock()
	e.m.UseRetention(e.st, keep)

	n, _, err := e.m.DeleteUnused(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if e.isLive(sess.ID) {
		t.Fatal("the unused session was not evicted")
	}
	if n != 1 {
		rec, _ := e.st.GetSession(ctx, sess.ID)
		t.Fatalf("DeleteUnused = %d; want the session deleted (its stored time %v was moved by its eviction)", n, rec.UpdatedAt)
	}
}

// TestRetentionDeletesArtifacts: a deleted session's artifacts directory (tool_chain's
// large results) goes with it, whether or not it named its own workdir; another
// session's stays.
func TestRetentionDeletesArtifacts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	arts := filepath.Join(root, "artifacts")
	e := newEvictEnv(t, Config{ArtifactDir: arts, WorkdirRoots: []string{root}})
	const keep = time.Hour
	e.m.UseRetention(e.st, keep)
	own, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	named, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}, Workdir: root})
	if err != nil {
		t.Fatal(err)
	}
	held, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	_, unsubscribe := held.Subscribe(1)
	defer unsubscribe()
	for _, s := range []*Session{own, named, held} {
		if err := mkdirs(filepath.Join(arts, s.ID)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(arts, s.ID, "art_x"), []byte("big"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, err := e.m.DeleteUnused(ctx, time.Now().Add(2*keep)); err != nil || n != 2 {
		t.Fatalf("DeleteUnused = %d, %v; want 2", n, err)
	}
	for _, s := range []*Session{own, named} {
		if exists(t, filepath.Join(arts, s.ID)) {
			t.Errorf("the artifacts of deleted session %s are still there", s.ID)
		}
	}
	if !exists(t, filepath.Join(arts, held.ID, "art_x")) {
		t.Error("the artifacts of a session in use were deleted")
	}
}

// TestRetentionKeepsANamedWorkdirInTheArtifactDir: as with the workspace directory, a
// workdir root holding data_dir lets a session name another session's artifacts
// directory (data_dir/artifacts/<id>) as its workdir: it would read another tenant's
// artifacts as its own files, and retention of that session would remove the
// directory from under it.
func TestRetentionKeepsANamedWorkdirInTheArtifactDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	arts := filepath.Join(root, "artifacts")
	e := newEvictEnv(t, Config{ArtifactDir: arts, WorkdirRoots: []string{root}})
	const keep = time.Hour
	e.m.UseRetention(e.st, keep)
	old, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := mkdirs(filepath.Join(arts, old.ID)); err != nil {
		t.Fatal(err)
	}
	for _, workdir := range []string{arts, filepath.Join(arts, old.ID)} {
		if _, _, err := e.m.Create(ctx, "t2", Spec{AvailableTools: []string{"echo"}, Workdir: workdir}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Create naming %s as its workdir: %v, want it refused (ErrInvalid)", workdir, err)
		}
	}
}

// TestWorkdirInsideDataDirRefused: a session may not name the daemon's data dir (its
// keys and database) or anything in it as its workdir, whatever the workdir roots
// allow; a workdir that contains the data dir is allowed (tools do not reach into it).
func TestWorkdirInsideDataDirRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEvictEnv(t, Config{})
	data := filepath.Dir(e.m.cfg.WorkspaceDir)
	e.m.cfg.DataDir = data
	e.m.cfg.WorkdirRoots = []string{filepath.Dir(data)}
	sibling := filepath.Join(filepath.Dir(data), "checkout")
	for _, d := range []string{filepath.Join(data, "sandbox"), sibling} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{data, filepath.Join(data, "sandbox")} {
		_, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}, Workdir: dir})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "keys") {
			t.Errorf("workdir %s: %v; want it refused (ErrInvalid) saying why", dir, err)
		}
	}
	for _, dir := range []string{sibling, filepath.Dir(data)} {
		if _, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}, Workdir: dir}); err != nil {
			t.Errorf("workdir %s: %v", dir, err)
		}
	}
}
