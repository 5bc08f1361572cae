package session

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/approval"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

type allowAll struct{}

func (allowAll) Check(approval.Request) approval.Decision {
	return approval.Decision{Outcome: approval.Allow}
}

// bgTool is a background tool (not concurrency-safe, like a long build).
type bgTool struct{ started, release chan struct{} }

func (b bgTool) Spec() tool.Spec {
	return tool.Spec{Name: "bg", Description: "Runs long.", Mode: tool.ModeBackground}
}
func (b bgTool) Run(ctx *tool.Context, _ json.RawMessage) (*tool.Result, error) {
	close(b.started)
	<-b.release
	return tool.TextResult("done"), nil
}

// TestRunApprovedBackgroundWithoutLock: a background call runs detached, without the
// session's serial lock, also when RunApproved runs it after its approval: the
// session's other unsafe calls do not wait for it.
func TestRunApprovedBackgroundWithoutLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bg := bgTool{started: make(chan struct{}), release: make(chan struct{})}
	ran := make(chan struct{})
	defer func() { close(bg.release); <-ran }()
	e := newExecEnv(t, Config{}, envOpts{tools: []tool.Tool{bg}})
	st, m, x := e.st, e.m, e.x
	x.UsePermissions(&Permissions{Policy: allowAll{}, Store: st, Notifier: store.NewInProcessNotifier(16)})
	sess, _, err := m.Create(ctx, "t1", Spec{AvailableTools: []string{"bg", "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	// The approved call whose requester went away: waiting, approval given.
	now := time.Now().UTC()
	if err := st.WriteCalls(ctx, []*store.Call{{ID: "tc_bg", SessionID: sess.ID, Tenant: "t1", ToolCallID: "b1", Name: "bg",
		Arguments: json.RawMessage(`{}`), Status: store.CallWaiting, Owner: "test", CreatedAt: now}}, nil); err != nil {
		t.Fatal(err)
	}
	go func() { defer close(ran); _ = x.RunApproved(ctx, m, "tc_bg") }()
	select {
	case <-bg.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the approved background call did not start")
	}
	p, err := x.Plan(sess, Batch{Calls: []CallRequest{{ToolCallID: "e1", Name: "echo"}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go x.Execute(ctx, p, func(ev Event) {
		if ev.Type == EventMessage {
			close(done)
		}
	})
	select {
	// The background call runs until the test ends: a call waiting for it would
	// never end, so a generous guard tells the two apart at any load.
	case <-done:
	case <-time.After(30 * time.Second):
		t.Error("an unsafe call of the session waited for a background call run by RunApproved (the session's lock is held for the background call's whole run)")
	}
}

// TestRunApprovedRefusedWhileShuttingDown: once the daemon stops (ReleaseWaiting), an
// approved call is not started any more: the decider's delayed run and the sweep of
// approved calls both reach RunApproved then, after the drain may have waited for
// every call (Wait), while the store and sandbox close; a call started so runs with
// nobody to record its result and is abandoned at the next start, although it ran.
// It stays approved and waiting, for another replica's sweep or this one's after
// its restart, which runs it exactly once.
func TestRunApprovedRefusedWhileShuttingDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newExecEnv(t, Config{}, envOpts{})
	st, m, x := e.st, e.m, e.x
	x.UsePermissions(&Permissions{Policy: allowAll{}, Store: st, Notifier: store.NewInProcessNotifier(16)})
	sess, _, err := m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := st.WriteCalls(ctx, []*store.Call{{ID: "tc_late", SessionID: sess.ID, Tenant: "t1", ToolCallID: "e1", Name: "echo",
		Arguments: json.RawMessage(`{"text":"x"}`), Status: store.CallWaiting, Owner: "test", CreatedAt: now}}, nil); err != nil {
		t.Fatal(err)
	}
	x.ReleaseWaiting() // the daemon stops
	if err := x.RunApproved(ctx, m, "tc_late"); !errors.Is(err, ErrShuttingDown) {
		t.Errorf("RunApproved while shutting down: %v, want ErrShuttingDown", err)
	}
	rec, err := st.GetCall(ctx, "tc_late")
	if err != nil || rec.Status != store.CallWaiting {
		t.Fatalf("the call after a refused RunApproved: %+v %v, want it still waiting (unclaimed)", rec, err)
	}
}

// TestRunApprovedNotifiesFinish: the result of an approved call that RunApproved ran
// (nobody waited for it on the deciding replica) is announced on TopicCall, as a
// waiter's run announces it: a stream resumed on another replica and followers of
// GET /v1/tool-calls/{id}/events there wake at once instead of at their next poll.
func TestRunApprovedNotifiesFinish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newExecEnv(t, Config{}, envOpts{})
	st, m, x := e.st, e.m, e.x
	n := store.NewInProcessNotifier(16)
	x.UsePermissions(&Permissions{Policy: allowAll{}, Store: st, Notifier: n})
	sess, _, err := m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := st.WriteCalls(ctx, []*store.Call{{ID: "tc_run", SessionID: sess.ID, Tenant: "t1", ToolCallID: "e1", Name: "echo",
		Arguments: json.RawMessage(`{"text":"x"}`), Status: store.CallWaiting, Owner: "test", CreatedAt: now}}, nil); err != nil {
		t.Fatal(err)
	}
	heard, stop := n.Subscribe(store.TopicCall)
	defer stop()
	if err := x.RunApproved(ctx, m, "tc_run"); err != nil {
		t.Fatal(err)
	}
	if rec, err := st.GetCall(ctx, "tc_run"); err != nil || !rec.Status.Terminal() {
		t.Fatalf("the call after RunApproved: %+v %v, want finished", rec, err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case id := <-heard:
			if id == "tc_run" {
				return
			}
		case <-deadline:
			t.Fatal("RunApproved finished the call without notifying TopicCall")
		}
	}
}
