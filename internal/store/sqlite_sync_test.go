package store

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLiteSynchronous: the writer connection syncs as SQLiteOptions says (FULL by
// default), and an unknown value is refused before anything is opened.
func TestSQLiteSynchronous(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opt  string
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{"", 2}, {SyncFull, 2}, {SyncNormal, 1}} {
		s, err := OpenSQLiteWith(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), SQLiteOptions{Synchronous: tc.opt})
		if err != nil {
			t.Fatal(err)
		}
		var got int
		if err := s.w.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&got); err != nil || got != tc.want {
			t.Errorf("synchronous %q: the writer has %d (%v), want %d", tc.opt, got, err, tc.want)
		}
		s.Close()
	}
	dir := t.TempDir()
	if _, err := OpenSQLiteWith(t.Context(), filepath.Join(dir, "db.sqlite"), SQLiteOptions{Synchronous: "off"}); err == nil || !strings.Contains(err.Error(), `"off"`) {
		t.Errorf("synchronous off: %v, want it refused", err)
	}
	if err := (Config{DataDir: dir, SQLite: SQLiteOptions{Synchronous: "extra"}}).Validate(); err == nil {
		t.Error("Config.Validate accepted synchronous extra")
	}
}
