package session

import (
	"context"
	"errors"
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
