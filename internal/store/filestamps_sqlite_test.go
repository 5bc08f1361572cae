package store_test

import (
	"path/filepath"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/storetest"
)

// TestSQLiteFileStamps: a stamp put through one store is read through another open
// on the same file, as a daemon restarted on its data directory reads it
// (storetest.FileStamps).
func TestSQLiteFileStamps(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "toolserverd.db")
	a, err := store.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := store.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	storetest.FileStamps(t, a, b)
}
