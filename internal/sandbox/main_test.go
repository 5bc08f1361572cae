package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/leakcheck"
)

// Set before any test runs: t.Setenv cannot be combined with t.Parallel.
const (
	secretEnv  = "TOOLSERVERD_TEST_SECRET"
	allowedEnv = "TOOLSERVERD_TEST_ALLOWED"
)

func TestMain(m *testing.M) {
	os.Setenv(secretEnv, "do-not-leak")
	os.Setenv(allowedEnv, "passed-through")
	leakcheck.VerifyTestMain(m)
}

var (
	capsOnce sync.Once
	caps     Capabilities
)

// hostCaps runs Detect once for the tests that only need to know what to skip.
func hostCaps() Capabilities {
	capsOnce.Do(func() { caps = Detect() })
	return caps
}

// backendCase is a sandbox flavour a test runs against.
type backendCase struct {
	name string
	cfg  Config
}

func allBackends() []backendCase {
	return []backendCase{
		{"local", Config{Mode: ModeLocal}},
		{"namespaces", Config{Mode: ModeIsolated, Backend: BackendNamespaces}},
		{"bwrap", Config{Mode: ModeIsolated, Backend: BackendBwrap}},
	}
}

func isolatedBackends() []backendCase { return allBackends()[1:] }

// newManager makes a manager for cfg with short test timings, skipping the test when
// the backend is not available here. Every job is killed at cleanup.
func newManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	if cfg.Mode == ModeIsolated {
		if _, err := hostCaps().backend(cfg.WithDefaults().Backend); err != nil {
			t.Skipf("backend %s not available here: %v", cfg.Backend, err)
		}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 300 * time.Millisecond
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return m
}

func newSandbox(t *testing.T, m *Manager, opt Options) (Sandbox, string) {
	t.Helper()
	root := t.TempDir()
	sb, err := m.New(root, opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return sb, sb.Root()
}

// run starts c and waits for it (at most 30 s).
func run(t *testing.T, sb Sandbox, c Cmd) (*Job, JobInfo) {
	t.Helper()
	j, err := sb.Start(context.Background(), c)
	if err != nil {
		t.Fatalf("Start(%q): %v", c.Command, err)
	}
	return j, wait(t, j)
}

func wait(t *testing.T, j *Job) JobInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := j.Wait(ctx)
	if err != nil {
		t.Fatalf("job %s did not end: %v", j.ID(), err)
	}
	return info
}

func output(t *testing.T, j *Job, stream string) string {
	t.Helper()
	var b strings.Builder
	var off int64
	for {
		data, next, err := j.ReadOutputRange(stream, off, 0)
		if err != nil {
			t.Fatalf("ReadOutputRange(%s, %d): %v", stream, off, err)
		}
		if len(data) == 0 {
			return b.String()
		}
		b.Write(data)
		off = next
	}
}

// groupMembers lists the live (not zombie) host processes whose process group is
// pgid, with their command names.
func groupMembers(pgid int) map[int]string {
	members := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may contain spaces and parentheses.
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		fields := strings.Fields(s[close+1:])
		if len(fields) >= 3 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" {
			members[pid] = s[open+1 : close]
		}
	}
	return members
}

// alive reports whether pid still exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// groupGone waits until no live process is left in the process group.
func groupGone(t *testing.T, pgid int) {
	t.Helper()
	if !eventually(20*time.Second, func() bool { return len(groupMembers(pgid)) == 0 }) {
		t.Errorf("process group %d still has %v", pgid, groupMembers(pgid))
	}
}
