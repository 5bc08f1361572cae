package main

import (
	"os"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// TestGCPercent: the daemon sets its own GOGC only when the environment sets none.
func TestGCPercent(t *testing.T) {
	if pct, ok := gcPercent([]string{"HOME=/root", "GOMEMLIMIT=900MiB"}); !ok || pct != defaultGCPercent {
		t.Errorf("no GOGC in the environment: %d, %v; want %d, true", pct, ok, defaultGCPercent)
	}
	for _, env := range [][]string{{"GOGC=100"}, {"HOME=/root", "GOGC=off"}, {"GOGC="}} {
		if _, ok := gcPercent(env); ok {
			t.Errorf("environment %q: the daemon would override the operator's GOGC", env)
		}
	}
}
