package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// schemaLines returns the "store schema…" log lines of a JSON log.
func schemaLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if msg, _ := m["msg"].(string); strings.HasPrefix(msg, "store schema") {
			lines = append(lines, m)
		}
	}
	return lines
}

// checkMigrate runs "toolserverd migrate" twice on the store: the first applies every
// migration and says from and to which version, the second finds nothing to do, and
// a store opened afterwards is at the binary's version with nothing left to apply.
func checkMigrate(t *testing.T, args []string, cfg store.Config) {
	t.Helper()
	var first, second bytes.Buffer
	if err := run(t.Context(), nil, append([]string{"migrate"}, args...), nil, &first); err != nil {
		t.Fatalf("migrate: %v\n%s", err, first.String())
	}
	lines := schemaLines(t, first.String())
	if len(lines) != 1 || lines[0]["msg"] != "store schema migrated" || lines[0]["from"] != 0.0 || lines[0]["applied"].(float64) < 1 {
		t.Fatalf("first migrate logged %v, want one 'store schema migrated' from 0\n%s", lines, first.String())
	}
	if strings.Contains(first.String(), "listening") {
		t.Errorf("migrate served:\n%s", first.String())
	}
	if err := run(t.Context(), nil, append([]string{"migrate"}, args...), nil, &second); err != nil {
		t.Fatalf("second migrate: %v\n%s", err, second.String())
	}
	lines2 := schemaLines(t, second.String())
	if len(lines2) != 1 || lines2[0]["msg"] != "store schema" || lines2[0]["version"] != lines[0]["to"] {
		t.Errorf("second migrate logged %v, want 'store schema' at version %v", lines2, lines[0]["to"])
	}
	s, err := store.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sc := s.(store.SchemaReporter).Schema()
	if sc.Applied != 0 || sc.Version != sc.Binary || float64(sc.Version) != lines[0]["to"] {
		t.Errorf("after migrate, opening the store found %+v; want nothing to apply at version %v", sc, lines[0]["to"])
	}
}

// TestMigrateSQLite: "toolserverd migrate" creates and migrates the SQLite database in
// the data dir (private to the daemon's user) and exits without serving or claiming.
func TestMigrateSQLite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	checkMigrate(t, []string{"--data-dir", dir, "--log-format", "json"}, store.Config{DataDir: dir})
	fi, err := os.Stat(filepath.Join(dir, store.SQLiteFileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("the database migrate created is %04o, want private", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), store.SQLiteFileName) {
			t.Errorf("migrate left %s in the data dir; want only the database", e.Name())
		}
	}
}

// TestMigratePostgres: the same on PostgreSQL, where no data dir is made (a migration
// job may have a read-only file system).
func TestMigratePostgres(t *testing.T) {
	u := pgtest.URL(t)
	dir := filepath.Join(t.TempDir(), "absent")
	checkMigrate(t, []string{"--store", u, "--data-dir", dir, "--log-format", "json"}, store.Config{URL: u})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("migrate on PostgreSQL made the data dir (%v)", err)
	}
}

// TestMigrateRefusals: a store that cannot be opened fails the command naming it, and
// so does a stray argument; --help prints the usage with the command.
func TestMigrateRefusals(t *testing.T) {
	var out bytes.Buffer
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(t.Context(), nil, []string{"migrate", "--store", "sqlite:" + file + "/toolserverd.db", "--log-format", "json"}, nil, &out)
	if err == nil || !strings.HasPrefix(err.Error(), "migrate: ") || !strings.Contains(err.Error(), file) {
		t.Errorf("migrate of a database under a regular file: %v; want the failure naming the path", err)
	}
	if err := run(t.Context(), nil, []string{"migrate", "now"}, nil, &out); err == nil || !strings.Contains(err.Error(), `unexpected argument "now"`) {
		t.Errorf("migrate now: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := t.TempDir()
	if err := run(ctx, nil, []string{"migrate", "--store", "postgres://127.0.0.1:1/none", "--store-connect-timeout", "60s", "--data-dir", dir}, nil, &out); err == nil {
		t.Error("migrate stopped while waiting for the store succeeded; nothing was migrated")
	}
	// An SQLite database a daemon holds is refused, not migrated under it.
	held := t.TempDir()
	s, err := store.Open(t.Context(), store.Config{DataDir: held})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := run(t.Context(), nil, []string{"migrate", "--data-dir", held}, nil, &out); err == nil || !strings.Contains(err.Error(), "in use by another toolserverd") {
		t.Errorf("migrate of an SQLite database in use: %v", err)
	}
	out.Reset()
	if err := run(t.Context(), nil, []string{"migrate", "--help"}, nil, &out); err != nil || !strings.Contains(out.String(), "toolserverd migrate") {
		t.Errorf("migrate --help: %v %q", err, out.String())
	}
}
