package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg     store.Config
		wantErr string
	}{
		{store.Config{DataDir: "/var/lib/toolserverd"}, ""},
		{store.Config{URL: "sqlite:/tmp/x.db"}, ""},
		{store.Config{URL: "sqlite:///tmp/x.db"}, ""},
		{store.Config{URL: "sqlite:rel/x.db"}, ""},
		{store.Config{URL: "postgres://u@h/db"}, ""},
		{store.Config{URL: "postgresql://u@h/db?search_path=s"}, ""},
		{store.Config{URL: "POSTGRES://u@h/db"}, ""},
		{store.Config{}, "no url and no data dir"},
		{store.Config{URL: "sqlite:"}, "needs a file path"},
		{store.Config{URL: "mysql://u:pw@h/db"}, `scheme "mysql" is not supported`},
		{store.Config{URL: "/var/lib/x.db"}, "no scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.cfg.URL+"|"+tt.cfg.DataDir, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Errorf("error leaks a password: %v", err)
			}
			if _, openErr := store.Open(t.Context(), tt.cfg); openErr == nil || openErr.Error() != err.Error() {
				t.Errorf("Open = %v, want the Validate error", openErr)
			}
		})
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name     string
		cfg      func(t *testing.T) store.Config
		wantType string
		wantFile string
	}{
		{"data dir", func(t *testing.T) store.Config { return store.Config{DataDir: filepath.Join(dir, "a")} },
			"*store.SQLite", filepath.Join(dir, "a", store.SQLiteFileName)},
		{"sqlite url", func(t *testing.T) store.Config {
			return store.Config{URL: "sqlite:" + filepath.Join(dir, "b", "c.db"), DataDir: "/ignored"}
		}, "*store.SQLite", filepath.Join(dir, "b", "c.db")},
		{"sqlite url form", func(t *testing.T) store.Config {
			return store.Config{URL: "sqlite://" + filepath.Join(dir, "d.db")}
		}, "*store.SQLite", filepath.Join(dir, "d.db")},
		{"postgres", func(t *testing.T) store.Config { return store.Config{URL: pgtest.URL(t), DataDir: dir} },
			"*store.Postgres", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := store.Open(t.Context(), tt.cfg(t))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			if got := typeName(s); got != tt.wantType {
				t.Errorf("Open returned %s, want %s", got, tt.wantType)
			}
			if err := s.Ping(t.Context()); err != nil {
				t.Errorf("Ping: %v", err)
			}
			if tt.wantFile != "" {
				if _, err := os.Stat(tt.wantFile); err != nil {
					t.Errorf("database file: %v", err)
				}
			}
		})
	}
}

func typeName(s store.Store) string {
	switch s.(type) {
	case *store.SQLite:
		return "*store.SQLite"
	case *store.Postgres:
		return "*store.Postgres"
	}
	return "other"
}

// TestOpenSQLiteRefusesASecondOpener: a second daemon on the same data dir would mark
// the first one's running calls failed at its start (same replica id, same database)
// while they still run. Open refuses the database while another Open holds it, and
// takes it once that one is closed. (OpenSQLite, which tests use to open one file
// several times, does not lock.)
func TestOpenSQLiteRefusesASecondOpener(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := store.Open(t.Context(), store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	second, err := store.Open(t.Context(), store.Config{URL: "sqlite:" + filepath.Join(dir, store.SQLiteFileName)})
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second Open of the same SQLite database succeeded while the first was open")
	}
	if !strings.Contains(err.Error(), "in use by another toolserverd") || !strings.Contains(err.Error(), "pid") {
		t.Errorf("refusal = %v, want it to say the database is in use by another toolserverd and its pid", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := store.Open(t.Context(), store.Config{DataDir: dir})
	if err != nil {
		t.Fatalf("Open after the first one was closed: %v", err)
	}
	again.Close()
}

// TestOpenSQLiteRefusesASecondOpenerThroughALink: SQLite opens the file a link leads
// to, so sqlite:PATH naming a symbolic link to another daemon's database is that
// database; its lock was taken beside the link, and the second daemon ran on the
// first one's database.
func TestOpenSQLiteRefusesASecondOpenerThroughALink(t *testing.T) {
	t.Parallel()
	dir, other := t.TempDir(), t.TempDir()
	first, err := store.Open(t.Context(), store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	link := filepath.Join(other, "my.db")
	if err := os.Symlink(filepath.Join(dir, store.SQLiteFileName), link); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"sqlite:" + link, "sqlite:" + filepath.Join(other, "..", filepath.Base(other), "my.db")} {
		second, err := store.Open(t.Context(), store.Config{URL: url})
		if err == nil {
			second.Close()
			t.Fatalf("Open(%s), a link to an open database, succeeded", url)
		}
		if !strings.Contains(err.Error(), "in use by another toolserverd") {
			t.Errorf("Open(%s): %v, want it in use by another toolserverd", url, err)
		}
	}
}

// TestOpenSQLiteFollowsNoLinkAsItsLockFile: a symbolic link planted where the lock
// file goes had the file it leads to truncated and given the daemon's pid. Open
// refuses it, naming it, and the file stays as it was.
func TestOpenSQLiteFollowsNoLinkAsItsLockFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, store.SQLiteFileName+".lock")
	if err := os.Symlink(victim, lock); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(t.Context(), store.Config{DataDir: dir})
	if err == nil {
		s.Close()
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the file the planted link leads to holds %q, want it untouched", b)
	}
	if err == nil || !strings.Contains(err.Error(), lock) {
		t.Errorf("Open with a link as its lock file: %v, want a refusal naming %s", err, lock)
	}
}
