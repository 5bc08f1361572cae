package store_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
)

// TestSQLiteFilesPrivate: the database holds every call's arguments and result,
// memories and scratchpads, so a new one, its WAL and its shared-memory file are the
// daemon user's alone (0600) whatever the umask, as the call output logs are: a data
// dir another user can enter (made beforehand, or a volume) does not open them.
func TestSQLiteFilesPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "toolserverd.db")
	s, err := store.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	defer s.Close()
	// The WAL and its index exist once something was written.
	if err := s.CreateSession(t.Context(), &store.Session{ID: "ses_1", Tenant: "acme", Spec: []byte(`{}`)}); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(name), err)
			continue
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %o, want 600", filepath.Base(name), m)
		}
	}
}
