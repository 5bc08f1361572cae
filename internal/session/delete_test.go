package session

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// TestDeleteSeenByOtherReplicas: a session one replica deletes at its client's request
// is dropped by another replica that holds it live, on that replica's next use of it,
// rather than served from memory while its records are gone; another tenant cannot
// delete it, and a session something holds is not deleted.
func TestDeleteSeenByOtherReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := store.NewInProcessNotifier(0)
	a, b, sa, sb := twoReplicas(t, func(m *Manager, name string) { m.UseNotifier(n, name) })

	if err := a.Delete(ctx, "t2", sa.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant's delete: %v, want ErrNotFound", err)
	}
	release := sa.hold()
	if err := a.Delete(ctx, "t1", sa.ID); !errors.Is(err, ErrBusy) {
		t.Fatalf("delete of a held session: %v, want ErrBusy", err)
	}
	if s, err := a.Get(ctx, "t1", sa.ID); err != nil || s != sa {
		t.Fatalf("after a refused delete, Get = %v, %v; want the same live session", s, err)
	}
	release()
	a.mu.Lock()
	a.loading[sa.ID]++ // as Get does between reading the record and admitting it
	a.mu.Unlock()
	if err := a.Delete(ctx, "t1", sa.ID); !errors.Is(err, ErrChanging) {
		t.Errorf("delete while a load is under way: %v, want ErrChanging", err)
	}
	a.mu.Lock()
	a.loading[sa.ID]--
	a.mu.Unlock()

	if err := a.Delete(ctx, "t1", sa.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := a.Get(ctx, "t1", sa.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("a: Get after delete = %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := b.Get(ctx, "t1", sb.ID)
		if errors.Is(err, ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b still serves the deleted session: %v", err)
		}
	}
	if b.Live() != 0 {
		t.Error("b kept the deleted session live")
	}
	if err := a.Delete(ctx, "t1", sa.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
}

// closerLog records the sessions a Closer was told are gone.
type closerLog struct {
	mu  sync.Mutex
	ids []string
}

func (c *closerLog) CloseSession(_ context.Context, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, id)
}

func (c *closerLog) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ids)
}

// TestDeletedSessionClosesWhatToolsHold: what a session's tools keep for it outside
// the process's memory of it (an MCP server's upstream session, a browser) is closed
// when the session is deleted, live or not, by its client or by retention; an
// eviction, after which the session goes on, keeps it.
func TestDeletedSessionClosesWhatToolsHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEvictEnv(t, Config{IdleTimeout: time.Minute})
	closer := &closerLog{}
	e.m.UseClosers(closer)
	create := func() *Session {
		t.Helper()
		s, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
		if err != nil {
			t.Fatal(err)
		}
		e.runEcho(t, s)
		return s
	}

	live := create()
	if err := e.m.Delete(ctx, "t1", live.ID); err != nil {
		t.Fatal(err)
	}
	if got := closer.got(); !slices.Equal(got, []string{live.ID}) {
		t.Fatalf("after deleting a live session, closed %v, want [%s]", got, live.ID)
	}

	evicted := create()
	if n, err := e.m.Sweep(ctx, time.Now().Add(time.Hour)); n != 1 || err != nil {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	if got := closer.got(); len(got) != 1 {
		t.Fatalf("an eviction closed %v: the session goes on and keeps what its tools hold", got[1:])
	}
	if err := e.m.Delete(ctx, "t1", evicted.ID); err != nil {
		t.Fatal(err)
	}
	if got := closer.got(); !slices.Equal(got, []string{live.ID, evicted.ID}) {
		t.Fatalf("after deleting an evicted session, closed %v, want [%s %s]", got, live.ID, evicted.ID)
	}

	e.m.UseRetention(e.st, time.Hour)
	old := create()
	if n, _, err := e.m.DeleteUnused(ctx, time.Now().Add(2*time.Hour)); n != 1 || err != nil {
		t.Fatalf("DeleteUnused = %d, %v", n, err)
	}
	if got := closer.got(); !slices.Equal(got, []string{live.ID, evicted.ID, old.ID}) {
		t.Fatalf("after retention deleted a session, closed %v, want [%s %s %s]", got, live.ID, evicted.ID, old.ID)
	}
}
