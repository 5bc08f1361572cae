package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestIsolatedCommandsDoNotSeeAnSQLiteStoreElsewhere: isolated commands do not see the
// data dir, which holds the database, but a database named by store: sqlite:PATH
// outside it (with its -wal, -shm and lock file) was readable by them: every call's
// arguments and results, every tenant's, and the lock a command could take. They are
// hidden like the config file.
func TestIsolatedCommandsDoNotSeeAnSQLiteStoreElsewhere(t *testing.T) {
	t.Parallel()
	if _, err := sandbox.NewManager(sandbox.Config{Mode: sandbox.ModeIsolated, StateDir: t.TempDir()}); err != nil {
		t.Skipf("isolated sandbox not available here: %v", err)
	}
	ext := filepath.Join(t.TempDir(), "ext")
	db := filepath.Join(ext, "db.sqlite")
	d := testdaemon.Start(t, func(c *config.Config) {
		c.Sandbox.Mode = "isolated"
		c.Store = "sqlite:" + db
	})
	for _, f := range []string{db, db + "-wal", db + ".lock"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s: %v (the daemon runs on it)", f, err)
		}
	}
	sb, err := d.App.Sandbox.New(t.TempDir(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := sb.Start(ctx, sandbox.Cmd{Command: "head -c 15 " + db + "; echo; wc -c < " + db + "-wal; cat " + db + ".lock"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	out, _, err := j.ReadOutputRange(sandbox.Stdout, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Covered, each reads empty or cannot be opened: no header, a WAL of 0 bytes (or
	// none), no pid.
	lines := strings.Split(string(out), "\n")
	if strings.Contains(string(out), "SQLite format") || len(lines) > 1 && strings.TrimSpace(lines[1]) != "" && strings.TrimSpace(lines[1]) != "0" ||
		strings.Contains(string(out), strconv.Itoa(os.Getpid())) {
		t.Errorf("an isolated command read the store: %q", out)
	}
}
