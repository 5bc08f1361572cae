package store

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/migrations"
)

func TestLoadMigrations(t *testing.T) {
	t.Parallel()
	f := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name    string
		fs      fs.FS
		want    []int
		wantErr string
	}{
		{"sorted by number", fstest.MapFS{
			"0010_ten.up.sql": f("A"), "0010_ten.down.sql": f("a"),
			"0002_two.up.sql": f("B"), "0002_two.down.sql": f("b"),
		}, []int{2, 10}, ""},
		{"embedded sqlite", migrations.SQLite(), consecutive(migrations.SQLite()), ""},
		{"embedded postgres", migrations.Postgres(), consecutive(migrations.Postgres()), ""},
		{"missing down", fstest.MapFS{"0001_core.up.sql": f("x")}, nil, "needs both"},
		{"stray file", fstest.MapFS{"0001_core.up.sql": f("x"), "0001_core.down.sql": f("y"), "README": f("")}, nil, "not named"},
		{"two names for one number", fstest.MapFS{"0001_a.up.sql": f("x"), "0001_b.down.sql": f("y")}, nil, "two names"},
		{"version zero", fstest.MapFS{"0000_a.up.sql": f("x"), "0000_a.down.sql": f("y")}, nil, "bad version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := loadMigrations(tt.fs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
				if m.Up == "" || m.Down == "" {
					t.Errorf("migration %d has an empty body", m.Version)
				}
			}
			// The embedded sets grow; check they start with what this test knows.
			if len(got) < len(tt.want) || !reflect.DeepEqual(got[:len(tt.want)], tt.want) {
				t.Errorf("versions = %v, want %v", got, tt.want)
			}
		})
	}
}

// schemaCheck reports the tables a migration target has and its recorded versions.
type schemaCheck func(t *testing.T) (tables []string, versions []int)

// testUpDownUp runs the embedded migrations down to nothing and up again, checking the
// tables and schema_migrations at each step: down files must work too.
func testUpDownUp(t *testing.T, target migrationTarget, ms []migration, check schemaCheck) {
	t.Helper()
	ctx := t.Context()
	all := make([]int, len(ms))
	for i, m := range ms {
		all[i] = m.Version
	}
	tables, versions := check(t)
	if !reflect.DeepEqual(versions, all) {
		t.Fatalf("after open: versions %v, want %v", versions, all)
	}
	for _, want := range []string{"sessions", "tool_calls"} {
		if !contains(tables, want) {
			t.Fatalf("after open: tables %v, missing %s", tables, want)
		}
	}
	if sc, err := migrateUp(ctx, target, ms); err != nil || sc.Applied != 0 {
		t.Fatalf("migrateUp on an up-to-date schema = %+v, %v; want 0 applied, nil", sc, err)
	}
	n, err := migrateDown(ctx, target, ms, 0)
	if err != nil || n != len(ms) {
		t.Fatalf("migrateDown(0) = %d, %v; want %d, nil", n, err, len(ms))
	}
	tables, versions = check(t)
	if len(versions) != 0 || !reflect.DeepEqual(tables, []string{"schema_migrations"}) {
		t.Fatalf("after down: tables %v versions %v; want only an empty schema_migrations", tables, versions)
	}
	if sc, err := migrateUp(ctx, target, ms); err != nil || sc.Applied != len(ms) || sc.From != 0 || sc.Version != all[len(all)-1] {
		t.Fatalf("migrateUp after down = %+v, %v; want %d applied from 0, nil", sc, err, len(ms))
	}
	tables, versions = check(t)
	if !reflect.DeepEqual(versions, all) || !contains(tables, "tool_calls") {
		t.Fatalf("after up again: tables %v versions %v", tables, versions)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func openTestSQLite(t *testing.T, path string) *SQLite {
	t.Helper()
	s, err := OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sqliteSchema(s *SQLite) schemaCheck {
	return func(t *testing.T) ([]string, []int) {
		t.Helper()
		var tables []string
		rows, err := s.r.QueryContext(t.Context(), `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n string
			rows.Scan(&n)
			tables = append(tables, n)
		}
		rows.Close()
		done, err := sqliteMigrations{s.r}.applied(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return tables, sortedKeys(done)
	}
}

func sortedKeys[V any](m map[int]V) []int {
	out := []int{}
	for v := range m {
		out = append(out, v)
	}
	sort.Ints(out)
	return out
}

func TestSQLiteMigrateUpDownUp(t *testing.T) {
	t.Parallel()
	s := openTestSQLite(t, filepath.Join(t.TempDir(), "x.db"))
	ms, err := loadMigrations(migrations.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	testUpDownUp(t, sqliteMigrations{s.w}, ms, sqliteSchema(s))
}

// TestSQLiteConcurrentOpen: processes (here: stores) opening one new file at once
// migrate it exactly once and all work.
func TestSQLiteConcurrentOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.db")
	const n = 4
	stores := openAtOnce(t, n, func(ctx context.Context) (*SQLite, error) { return OpenSQLite(ctx, path) })
	_, versions := sqliteSchema(stores[0])(t)
	if !reflect.DeepEqual(versions, consecutive(migrations.SQLite())) {
		t.Errorf("versions = %v, want [1]", versions)
	}
	// Every store writes; all see all.
	for i, s := range stores {
		c := &Call{ID: fmt.Sprintf("tc_%d", i), SessionID: "ses", Name: "x", Status: CallRunning}
		if err := s.WriteCalls(t.Context(), []*Call{c}, nil); err != nil {
			t.Fatalf("store %d WriteCalls: %v", i, err)
		}
	}
	calls, err := stores[n-1].ListCalls(t.Context(), "ses", CallPage{})
	if err != nil || len(calls) != n {
		t.Errorf("ListCalls = %d calls, %v; want %d", len(calls), err, n)
	}
}

// TestSQLiteReopen: what was committed is there after close and reopen, and a version
// recorded by a newer binary does not stop an older one from opening.
func TestSQLiteReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nested", "dir", "x.db")
	s, err := OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)
	c := &Call{ID: "tc_1", SessionID: "ses", ToolCallID: "call_1", Name: "x", Status: CallRunning, CreatedAt: created}
	if err := s.WriteCalls(t.Context(), []*Call{c}, []CallFinish{{ID: "tc_1", Status: CallFailed,
		Result: tool.ErrorResult(tool.KindTimeout, "slow")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', '')`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	s = openTestSQLite(t, path)
	if s.Path() != path {
		t.Errorf("Path() = %s, want %s", s.Path(), path)
	}
	got, err := s.GetCall(t.Context(), "tc_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != CallFailed || got.ErrorKind != tool.KindTimeout || !got.CreatedAt.Equal(created.Truncate(time.Microsecond)) {
		t.Errorf("after reopen: %+v", got)
	}
}

// TestSQLiteReadsDoNotWaitForWriter: a read returns while a write transaction is open.
func TestSQLiteReadsDoNotWaitForWriter(t *testing.T) {
	t.Parallel()
	s := openTestSQLite(t, filepath.Join(t.TempDir(), "x.db"))
	c := &Call{ID: "tc_1", SessionID: "ses", Name: "x", Status: CallRunning}
	if err := s.WriteCalls(t.Context(), []*Call{c}, nil); err != nil {
		t.Fatal(err)
	}
	tx, err := s.w.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(t.Context(), `UPDATE tool_calls SET status = 'failed' WHERE id = 'tc_1'`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	got, err := s.GetCall(ctx, "tc_1")
	if err != nil {
		t.Fatalf("GetCall while a write transaction is open: %v", err)
	}
	if got.Status != CallRunning {
		t.Errorf("read saw uncommitted status %q", got.Status)
	}
}

func TestSQLiteOpenErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"", ":memory:", filepath.Join(file, "x.db")} {
		if s, err := OpenSQLite(t.Context(), path); err == nil {
			s.Close()
			t.Errorf("OpenSQLite(%q) succeeded, want an error", path)
		}
	}
}

func pgSchema(url string) schemaCheck {
	return func(t *testing.T) ([]string, []int) {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(t.Context(), `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		done, err := pgMigrations{conn}.applied(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return tables, sortedKeys(done)
	}
}

func TestPostgresMigrateUpDownUp(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s, err := OpenPostgres(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ms, err := loadMigrations(migrations.Postgres())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	testUpDownUp(t, pgMigrations{conn}, ms, pgSchema(url))
}

// openAtOnce calls open n times at once, as replicas or processes starting together
// do, and returns the n stores, closed when the test ends.
func openAtOnce[S interface{ Close() error }](t *testing.T, n int, open func(context.Context) (S, error)) []S {
	t.Helper()
	stores := make([]S, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = open(t.Context())
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] == nil {
			t.Cleanup(func() { stores[i].Close() })
		}
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
	}
	return stores
}

// TestPostgresConcurrentOpen: replicas starting together serialize on the advisory lock
// and apply each migration once.
func TestPostgresConcurrentOpen(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	openAtOnce(t, 6, func(ctx context.Context) (*Postgres, error) { return OpenPostgres(ctx, url) })
	tables, versions := pgSchema(url)(t)
	if !reflect.DeepEqual(versions, consecutive(migrations.Postgres())) || !contains(tables, "tool_calls") {
		t.Errorf("tables %v versions %v", tables, versions)
	}
}

func TestPostgresOpenErrors(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	// A search_path naming a schema that does not exist: nowhere to create tables.
	bad := strings.Replace(url, "search_path=", "search_path=nope_", 1)
	if s, err := OpenPostgres(t.Context(), bad); err == nil {
		s.Close()
		t.Fatalf("OpenPostgres with a missing schema succeeded")
	} else if !strings.Contains(err.Error(), "search_path") {
		t.Errorf("error %q does not point at search_path", err)
	}
	if _, err := OpenPostgres(t.Context(), "postgres://127.0.0.1:1/x?connect_timeout=2"); err == nil {
		t.Errorf("OpenPostgres on a closed port succeeded")
	}
	if _, err := OpenPostgres(t.Context(), "postgres://user:secret@host:notaport/x"); err == nil {
		t.Errorf("OpenPostgres with a bad URL succeeded")
	} else if strings.Contains(err.Error(), "secret") {
		t.Errorf("error leaks the password: %v", err)
	}
}

// consecutive is 1..n for the n up-migrations in fsys: embedded migrations must be
// numbered without gaps.
func consecutive(fsys fs.FS) []int {
	ups, _ := fs.Glob(fsys, "*.up.sql")
	out := make([]int, len(ups))
	for i := range out {
		out[i] = i + 1
	}
	return out
}
