package store_test

import (
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/store/storetest"
)

func TestInProcessNotifier(t *testing.T) {
	t.Parallel()
	storetest.RunNotifier(t, func(t *testing.T, buffer int) (store.Notifier, store.Notifier) {
		n := store.NewInProcessNotifier(buffer)
		return n, n
	})
}

// TestPGNotifier: a NOTIFY sent through one PGNotifier reaches the subscribers of
// another on the same database (two replicas).
func TestPGNotifier(t *testing.T) {
	t.Parallel()
	storetest.RunNotifier(t, func(t *testing.T, buffer int) (store.Notifier, store.Notifier) {
		u := pgtest.URL(t)
		var ns []*store.PGNotifier
		for range 2 {
			n, err := store.NewPGNotifierWithConfig(t.Context(), store.PGNotifierConfig{URL: u, Buffer: buffer})
			if err != nil {
				t.Fatalf("NewPGNotifier: %v", err)
			}
			if err := n.Start(t.Context()); err != nil {
				t.Fatalf("Start: %v", err)
			}
			t.Cleanup(n.Stop)
			ns = append(ns, n)
		}
		return ns[0], ns[1]
	})
}
