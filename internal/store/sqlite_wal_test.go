package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSQLiteWALCutBack: a WAL that grew while a reader held an old snapshot (no
// checkpoint could reset it) is cut back to sqliteWALLimit once the reader is gone:
// the background checkpoint completes and the next write resets and truncates it.
func TestSQLiteWALCutBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := s.r.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sessions").Scan(&n); err != nil {
		t.Fatal(err)
	}
	big, _ := json.Marshal(map[string]string{"note": strings.Repeat("x", 256<<10)})
	write := func(i int) {
		now := time.Now().UTC()
		if err := s.CreateSession(ctx, &Session{ID: fmt.Sprintf("ses_%d", i), Tenant: "t", Spec: big, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 { // 25 MiB
		write(i)
	}
	walSize := func() int64 {
		info, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	if got := walSize(); got <= sqliteWALLimit {
		t.Fatalf("the WAL has %d bytes with a reader pinning it; the test needs it over %d", got, sqliteWALLimit)
	}
	_ = tx.Rollback()
	_ = conn.Close()
	for i, deadline := 100, time.Now().Add(10*time.Second); walSize() > sqliteWALLimit; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the WAL still has %d bytes 10 s after the reader left", walSize())
		}
		time.Sleep(100 * time.Millisecond)
		write(i)
	}
}
