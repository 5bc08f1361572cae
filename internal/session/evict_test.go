package session

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// blockTool runs until its test closes release.
type blockTool struct {
	started chan struct{}
	release chan struct{}
}

func (b blockTool) Spec() tool.Spec {
	return tool.Spec{Name: "block", Description: "Blocks.", Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true}}
}

func (b blockTool) Run(ctx *tool.Context, _ json.RawMessage) (*tool.Result, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
		return tool.TextResult("released"), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type evictEnv struct {
	st      *store.SQLite
	commits *store.GroupCommitter
	m       *Manager
	x       *Executor
	block   blockTool
}

// envOpts adds tools to an evictEnv, and may wrap the executor's recorder.
type envOpts struct {
	tools    []tool.Tool
	recorder func(*store.GroupCommitter) Recorder
}

// newEvictEnv builds a Manager and an Executor over a real SQLite store and a real
// group committer.
func newEvictEnv(t *testing.T, cfg Config) *evictEnv { return newExecEnv(t, cfg, envOpts{}) }

func newExecEnv(t *testing.T, cfg Config, o envOpts) *evictEnv {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.OpenSQLite(ctx, filepath.Join(dir, "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	commits, err := store.NewGroupCommitter(st, store.GroupCommitConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := commits.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(commits.Stop)
	env := &evictEnv{st: st, commits: commits, block: blockTool{started: make(chan struct{}, 1), release: make(chan struct{})}}
	tm := toolmgr.New()
	tm.MustRegister(append([]tool.Tool{named{"echo", "builtin"}, named{"other", "builtin"}, env.block}, o.tools...)...)
	cfg.WorkspaceDir = filepath.Join(dir, "workspaces")
	if env.m, err = NewManager(cfg, st, tm); err != nil {
		t.Fatal(err)
	}
	var rec Recorder = commits
	if o.recorder != nil {
		rec = o.recorder(commits)
	}
	env.x = NewExecutor(ExecConfig{Owner: "test"}, rec, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return env
}

func (e *evictEnv) isLive(id string) bool {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	_, ok := e.m.live[id]
	return ok
}

// pause makes sure time.Now moves past the instant it returns.
func pause() time.Time {
	time.Sleep(5 * time.Millisecond)
	at := time.Now()
	time.Sleep(5 * time.Millisecond)
	return at
}

// TestEvictionAndReload: a session used recently stays; an idle one leaves memory and
// Get loads it again with its whitelist, the allow rules its approvals granted, its
// narrowed tool list and its active skill.
func TestEvictionAndReload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const idle = time.Minute
	e := newEvictEnv(t, Config{IdleTimeout: idle})
	idleSess, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo", "other"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.AllowRules(ctx, "t1", idleSess.ID, []string{"echo"}); err != nil {
		t.Fatal(err)
	}
	idleSess.Narrow([]string{"echo"})
	idleSess.activeSkill().Set(skills.Skill{Name: "review", AllowedTools: []string{"echo"}})
	used, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"other"}})
	if err != nil {
		t.Fatal(err)
	}

	if n, err := e.m.Sweep(ctx, time.Now().Add(idle/2)); n != 0 || err != nil {
		t.Fatalf("sweep before the idle timeout evicted %d (%v)", n, err)
	}
	cut := pause()
	if got, err := e.m.Get(ctx, "t1", used.ID); err != nil || got != used {
		t.Fatalf("Get of a live session: %p %v, want %p", got, err, used)
	}
	// Idle for exactly the timeout: the idle session, used before cut, goes; the one
	// touched after cut stays.
	n, err := e.m.Sweep(ctx, cut.Add(idle))
	if err != nil || n != 1 {
		t.Fatalf("sweep evicted %d (%v), want 1", n, err)
	}
	if e.isLive(idleSess.ID) || !e.isLive(used.ID) || e.m.Live() != 1 {
		t.Fatalf("live after sweep: idle %v, used %v, count %d", e.isLive(idleSess.ID), e.isLive(used.ID), e.m.Live())
	}

	back, err := e.m.Get(ctx, "t1", idleSess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if back == idleSess || !e.isLive(idleSess.ID) {
		t.Fatal("Get did not load the evicted session into memory again")
	}
	if got := strings.Join(back.Tools.Names(), " "); got != "echo other" {
		t.Errorf("whitelist after reload: %q", got)
	}
	if spec := back.CurrentSpec(); spec.Rules == nil || !slices.Equal(spec.Rules.Allow, []string{"echo"}) {
		t.Errorf("allow rules in the spec after reload: %+v", spec.Rules)
	}
	if rules := back.Rules(); len(rules) != 1 || rules[0].String() != "echo" {
		t.Errorf("parsed rules after reload: %v", rules)
	}
	if !back.Selected("echo") || back.Selected("other") {
		t.Errorf("narrowed list lost: echo %v, other %v", back.Selected("echo"), back.Selected("other"))
	}
	if back.skillAllows("other") || !back.skillAllows("echo") {
		t.Error("the active skill's tool limit was lost")
	}
	if _, err := e.m.Get(ctx, "t2", idleSess.ID); err != ErrNotFound {
		t.Errorf("another tenant's Get after reload: %v", err)
	}

	// The selection was lifted since: the stored one must not come back.
	back.Narrow(nil)
	if n, err := e.m.Sweep(ctx, time.Now().Add(idle)); n != 2 || err != nil {
		t.Fatalf("second sweep evicted %d (%v), want 2", n, err)
	}
	again, err := e.m.Get(ctx, "t1", idleSess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Selected("other") {
		t.Error("a lifted selection came back after the second reload")
	}
	if again.skillAllows("other") {
		t.Error("the active skill was lost on the second eviction")
	}

	// Only a selection, lifted after a reload: the stored one is cleared on eviction.
	narrowed, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo", "other"}})
	if err != nil {
		t.Fatal(err)
	}
	narrowed.Narrow([]string{"echo"})
	evictReload := func() *Session {
		t.Helper()
		if n, err := e.m.Sweep(ctx, time.Now().Add(idle)); n == 0 || err != nil || e.isLive(narrowed.ID) {
			t.Fatalf("sweep evicted %d (%v)", n, err)
		}
		s, err := e.m.Get(ctx, "t1", narrowed.ID)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := evictReload(); s.Selected("other") {
		t.Error("the narrowed list was lost")
	} else {
		s.Narrow(nil)
	}
	if s := evictReload(); !s.Selected("other") {
		t.Error("a lifted selection came back from the store")
	}
}

// TestEvictionKeepsSessionsInUse: a session is not evicted while a call of it runs,
// while a subscription to its events is open, or while its sandbox runs a job; it is
// once they end.
func TestEvictionKeepsSessionsInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const idle = time.Minute
	e := newEvictEnv(t, Config{IdleTimeout: idle})
	sb, err := sandbox.NewManager(sandbox.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Shutdown(context.Background()) })
	e.m.UseResources(sb)

	sess, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"block"}})
	if err != nil {
		t.Fatal(err)
	}
	far := func() time.Time { return time.Now().Add(10 * idle) }

	// A running call.
	p, err := e.x.Plan(sess, Batch{Calls: []CallRequest{{ToolCallID: "c1", Name: "block"}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *tool.Result, 1)
	go e.x.Execute(ctx, p, func(ev Event) {
		if ev.Type == EventMessage {
			done <- ev.Result
		}
	})
	<-e.block.started
	if n, err := e.m.Sweep(ctx, far()); n != 0 || err != nil || !e.isLive(sess.ID) {
		t.Fatalf("a session with a running call was evicted (%d, %v)", n, err)
	}
	close(e.block.release)
	if res := <-done; res.IsError {
		t.Fatalf("the call failed: %+v", res)
	}
	if err := e.x.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	// An open subscription.
	_, stop := sess.Subscribe(1)
	if n, _ := e.m.Sweep(ctx, far()); n != 0 {
		t.Fatal("a session with an open subscription was evicted")
	}
	stop()

	// A job running in its sandbox.
	box, err := sb.For(sess.Info)
	if err != nil {
		t.Fatal(err)
	}
	job, err := box.Start(ctx, sandbox.Cmd{Command: "sleep 60", Timeout: sandbox.NoTimeout})
	if err != nil {
		t.Fatal(err)
	}
	sess.mu.Lock()
	sess.lastUsed = time.Now().Add(-2 * idle) // last requested long ago; the job runs on
	sess.mu.Unlock()
	if n, _ := e.m.Sweep(ctx, time.Now()); n != 0 || !e.isLive(sess.ID) {
		t.Fatal("a session whose sandbox runs a job was evicted")
	}
	job.Kill()
	if _, err := job.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The idle clock started again when the sweep found the job running: the job's
	// result stays readable for an idle timeout after it ends.
	if n, _ := e.m.Sweep(ctx, time.Now().Add(idle/2)); n != 0 || !e.isLive(sess.ID) {
		t.Fatal("a session was evicted less than its idle timeout after its job was last seen running")
	}

	// Nothing runs: evicted, and its sandbox released.
	if n, err := e.m.Sweep(ctx, far()); n != 1 || err != nil || e.isLive(sess.ID) {
		t.Fatalf("an unused session was not evicted (%d, %v)", n, err)
	}
	if _, err := box.Start(ctx, sandbox.Cmd{Command: "true"}); err == nil {
		t.Error("the evicted session's sandbox was not released")
	}

	// A caller that still held the evicted session and runs a call with it makes it
	// live again, rather than running a session nobody can interrupt.
	release := sess.hold()
	if !e.isLive(sess.ID) {
		t.Error("holding an evicted session did not make it live again")
	}
	release()
}

// TestMaxLiveEvictsLeastRecentlyUsed: past the cap the sweep evicts the sessions used
// longest ago, before they are idle, and never one in use.
func TestMaxLiveEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEvictEnv(t, Config{IdleTimeout: time.Hour, MaxLive: 2})
	var ids []string
	for i := range 4 {
		s, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			release := s.hold() // the least recently used, but in use
			defer release()
		}
		ids = append(ids, s.ID)
		pause()
	}
	if len(e.m.kick) != 1 {
		t.Error("passing the cap did not ask the sweeper to run")
	}
	if n, err := e.m.Sweep(ctx, time.Now()); err != nil || n != 0 {
		t.Fatalf("sweep evicted %d (%v) sessions used a moment ago, want none (lruGrace)", n, err)
	}
	n, err := e.m.Sweep(ctx, time.Now().Add(lruGrace))
	if err != nil || n != 2 {
		t.Fatalf("sweep evicted %d (%v), want 2", n, err)
	}
	for i, want := range []bool{true, false, false, true} {
		if e.isLive(ids[i]) != want {
			t.Errorf("session %d live = %v, want %v", i, !want, want)
		}
	}
}

func TestSweeperStops(t *testing.T) {
	t.Parallel()
	e := newEvictEnv(t, Config{IdleTimeout: time.Second})
	if err := e.m.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Start(context.Background(), nil); err == nil {
		t.Error("a second Start was accepted")
	}
	s, _, err := e.m.Create(context.Background(), "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.isLive(s.ID) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if e.isLive(s.ID) {
		t.Error("the sweeper did not evict an idle session")
	}
	e.m.Stop()
	e.m.Stop()
	select {
	case <-e.m.done:
	default:
		t.Error("Stop returned before the sweeper ended")
	}
}

// TestStoredSpecKeepsNoSkills: available_skills [] (none) and absent (every skill)
// must come back apart from the stored spec, or a reload opens every skill.
func TestStoredSpecKeepsNoSkills(t *testing.T) {
	for _, in := range []storedSpec{{Spec: Spec{AvailableSkills: []string{}}}, {Spec: Spec{}}} {
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var out storedSpec
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		if (out.AvailableSkills == nil) != (in.AvailableSkills == nil) {
			t.Errorf("available_skills %#v stored as %s came back %#v", in.AvailableSkills, raw, out.AvailableSkills)
		}
	}
}
