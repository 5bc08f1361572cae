package app_test

import (
	"database/sql"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
	"github.com/toolserverd/toolserverd/migrations"
)

// latestMigration is the highest migration version this binary has.
func latestMigration(t *testing.T, fsys fs.FS) int {
	t.Helper()
	names, err := fs.Glob(fsys, "*.up.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations: %v %v", names, err)
	}
	latest := 0
	for _, n := range names {
		v, err := strconv.Atoi(strings.SplitN(n, "_", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		latest = max(latest, v)
	}
	return latest
}

// logLine returns the first JSON log line whose msg is msg, decoded.
func logLine(t *testing.T, logs, msg string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

// readyzSchema is /readyz's info.schema.
func readyzSchema(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Info map[string]any `json:"info"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	s, _ := r.Info["schema"].(map[string]any)
	return s
}

// TestStoreSchemaReported: an operator sees what the start did to the schema (the log
// says from which version to which it migrated, /readyz shows the version), and a
// database a newer toolserverd migrated (a downgrade, or an old replica of a rolling
// deploy restarting) is a warning naming both versions and the migrations this binary
// does not have, not a silent start.
func TestStoreSchemaReported(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	latest := latestMigration(t, migrations.SQLite())
	start := func(t *testing.T) (*testdaemon.Daemon, *lockedBuffer) {
		var logs lockedBuffer
		d := testdaemon.StartWithLog(t, func(c *config.Config) { c.DataDir = dir }, slog.New(slog.NewJSONHandler(&logs, nil)))
		return d, &logs
	}
	num := func(m map[string]any, k string) int {
		f, _ := m[k].(float64)
		return int(f)
	}

	t.Run("new database", func(t *testing.T) {
		d, logs := start(t)
		l := logLine(t, logs.String(), "store schema migrated")
		if l == nil || num(l, "from") != 0 || num(l, "to") != latest || num(l, "applied") != latest {
			t.Fatalf("want a 'store schema migrated' line from 0 to %d, %d applied; log:\n%s", latest, latest, logs.String())
		}
		if s := readyzSchema(t, d.URL); num(s, "version") != latest || num(s, "binary") != latest {
			t.Fatalf("/readyz info.schema = %v, want version and binary %d", s, latest)
		}
	})

	t.Run("up to date", func(t *testing.T) {
		_, logs := start(t)
		if l := logLine(t, logs.String(), "store schema migrated"); l != nil {
			t.Fatalf("nothing to migrate, yet: %v", l)
		}
		if l := logLine(t, logs.String(), "store schema"); l == nil || num(l, "version") != latest {
			t.Fatalf("want a 'store schema' line with version %d; log:\n%s", latest, logs.String())
		}
	})

	// A newer binary recorded a migration this one does not have.
	db, err := sql.Open("sqlite", filepath.Join(dir, store.SQLiteFileName))
	if err != nil {
		t.Fatal(err)
	}
	newer := latest + 1
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from_the_future', '2030-01-01T00:00:00Z')`, newer); err != nil {
		t.Fatal(err)
	}
	db.Close()

	t.Run("newer than the binary", func(t *testing.T) {
		d, logs := start(t)
		l := logLine(t, logs.String(), "the store's schema is newer than this binary")
		if l == nil || l["level"] != "WARN" || num(l, "version") != newer || num(l, "binary") != latest ||
			!strings.Contains(l["unknown"].(string), strconv.Itoa(newer)+"_from_the_future") {
			t.Fatalf("want a warning naming version %d, binary %d and %d_from_the_future; log:\n%s", newer, latest, newer, logs.String())
		}
		if s := readyzSchema(t, d.URL); num(s, "version") != newer || num(s, "binary") != latest {
			t.Fatalf("/readyz info.schema = %v, want version %d binary %d", s, newer, latest)
		}
	})
}

// TestReadableDatabaseWarned: a database an older release made with the umask's mode
// (0644) can be read by every local user; the daemon, which leaves its mode alone,
// says so at start with what to run. A private one is not warned about.
func TestReadableDatabaseWarned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Each start in a subtest of its own, which stops the daemon at its end: one data
	// dir takes one daemon at a time.
	start := func(t *testing.T) string {
		var logs lockedBuffer
		t.Run("start", func(t *testing.T) {
			testdaemon.StartWithLog(t, func(c *config.Config) { c.DataDir = dir }, slog.New(slog.NewJSONHandler(&logs, nil)))
		})
		return logs.String()
	}
	const msg = "the store's database file can be read by other users"
	if logs := start(t); logLine(t, logs, msg) != nil {
		t.Fatalf("a new (0600) database warned about: %s", logs)
	}
	path := filepath.Join(dir, store.SQLiteFileName)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	l := logLine(t, start(t), msg)
	if l == nil || l["level"] != "WARN" || l["mode"] != "0644" || !strings.Contains(l["effect"].(string), "chmod 600 "+path) {
		t.Fatalf("want a warning naming the mode and the chmod to run: %v", l)
	}
}
