package session

import (
	"context"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// releaseHook is the real sandbox manager; between evict dropping the session from
// the live map and releasing its sandbox, `between` starts (another goroutine's work)
// and is given a moment.
type releaseHook struct {
	*sandbox.Manager
	between func()
}

func (r *releaseHook) Release(ctx context.Context, s *tool.Session) error {
	if r.between != nil {
		go r.between()
		r.between = nil
		time.Sleep(200 * time.Millisecond)
	}
	return r.Manager.Release(ctx, s)
}

// TestReleaseBeforeRevive: a call that holds a session (which makes an evicted
// session live again) after evict took it out of memory but before evict released its
// resources waits for that release, and the job it then starts lives on.
func TestReleaseBeforeRevive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEvictEnv(t, Config{IdleTimeout: time.Minute})
	sb, err := sandbox.NewManager(sandbox.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Shutdown(context.Background()) })
	hook := &releaseHook{Manager: sb}
	e.m.UseResources(hook)
	sess, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	var job *sandbox.Job
	var release func()
	started := make(chan error, 1)
	hook.between = func() {
		release = sess.hold() // a call of the session starts: the session is live again
		box, err := sb.For(sess.Info)
		if err == nil {
			job, err = box.Start(ctx, sandbox.Cmd{Command: "sleep 30", Timeout: sandbox.NoTimeout})
		}
		started <- err
	}
	if n, _ := e.m.Sweep(ctx, time.Now().Add(time.Hour)); n != 1 {
		t.Fatalf("evicted %d", n)
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	defer release()
	if !e.isLive(sess.ID) {
		t.Fatal("the held session is not live")
	}
	select {
	case <-job.Done():
		info, _ := job.Wait(ctx)
		t.Errorf("the job of a live session that holds a running call was ended by eviction: %s (%s)", info.Status, info.Signal)
	case <-time.After(time.Second):
		job.Kill()
	}
}
