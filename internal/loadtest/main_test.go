// Package loadtest holds the load, soak and fault tests of issue #10: many concurrent
// NDJSON streams, many idle sessions within a measured memory budget, a soak after
// which goroutines and heap return to baseline, and faults (SIGKILL mid-batch,
// PostgreSQL restarted under load, disk full under the SQLite store). Every test runs
// real daemons on loopback, bounded in count and time; the numbers are the
// defaults where this is feasible in CI, and env vars raise or lower them.
package loadtest

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	// Each stream holds a client and a server socket; 1,000 streams plus the daemon's
	// own files need more than a default soft limit of 1,024 descriptors.
	if err := raiseNoFile(8192); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: raise RLIMIT_NOFILE:", err)
	}
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func raiseNoFile(want uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= want {
		return nil
	}
	lim.Cur = min(want, lim.Max)
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

// envInt reads a scale knob: the environment variable if set, else def.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// envDuration reads a duration knob (Go syntax, e.g. 5m).
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}
