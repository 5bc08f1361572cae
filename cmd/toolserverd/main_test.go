package main

import (
	"bytes"
	"context"
	"os"
	"strings"
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

// TestHelp: --help prints the flags and exits 0; it is not a configuration error.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var out bytes.Buffer
		if err := run(context.Background(), nil, []string{arg}, nil, &out); err != nil {
			t.Errorf("%s: %v", arg, err)
		}
		if !strings.Contains(out.String(), "--config") || !strings.Contains(out.String(), "TOOLSERVER_") {
			t.Errorf("%s printed %q, want the flags", arg, out.String())
		}
	}
}
