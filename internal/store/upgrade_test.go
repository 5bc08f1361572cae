package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/migrations"
)

// upgradeCall is the call an older binary recorded before the upgrade, in the columns
// migration 0001 made (every later one adds with defaults).
const upgradeCall = "tc_before_upgrade"

// checkUpgraded checks what opening a database at version from found and kept.
func checkUpgraded(t *testing.T, s interface {
	SchemaReporter
	GetCall(context.Context, string) (*Call, error)
	GetSession(context.Context, string) (*Session, error)
}, from int, ms []migration) {
	t.Helper()
	latest := ms[len(ms)-1].Version
	sc := s.Schema()
	if sc.From != from || sc.Version != latest || sc.Binary != latest || sc.Applied != len(ms)-from || len(sc.Unknown) != 0 {
		t.Errorf("Schema() = %+v, want from %d to %d, %d applied", sc, from, latest, len(ms)-from)
	}
	c, err := s.GetCall(t.Context(), upgradeCall)
	if err != nil {
		t.Fatalf("the call recorded at version %d: %v", from, err)
	}
	if c.Status != CallSucceeded || c.Result == nil || c.Result.Text() != "recorded before the upgrade" || c.OutputOpen {
		t.Errorf("the call recorded at version %d reads %+v", from, c)
	}
	if _, err := s.GetSession(t.Context(), "ses_before_upgrade"); err != nil {
		t.Errorf("the session recorded at version %d: %v", from, err)
	}
}

// TestSQLiteUpgradeFromEveryVersion: a database an older binary left at any version
// (only its first N migrations) migrates to the latest on open, keeps its records and
// says from which version it came.
func TestSQLiteUpgradeFromEveryVersion(t *testing.T) {
	t.Parallel()
	ms, err := loadMigrations(migrations.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	res, err := encodeResult(tool.TextResult("recorded before the upgrade"))
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n < len(ms); n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "old.db")
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := migrateUp(t.Context(), sqliteMigrations{db}, ms[:n]); err != nil {
				t.Fatal(err)
			}
			at := sqliteTime(time.Now())
			if _, err := db.Exec(`INSERT INTO sessions (id, tenant, spec, created_at, updated_at) VALUES ('ses_before_upgrade', 'default', '{}', ?, ?)`, at, at); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO tool_calls (id, session_id, tenant, tool_call_id, name, arguments, status, result, created_at, started_at, finished_at)
				VALUES (?, 'ses_before_upgrade', 'default', 'call_1', 'execute_command', '{"command":"true"}', 'succeeded', ?, ?, ?, ?)`,
				upgradeCall, string(res), at, at, at); err != nil {
				t.Fatal(err)
			}
			db.Close()
			checkUpgraded(t, openTestSQLite(t, path), n, ms)
		})
	}
}

// TestPostgresUpgradeFromEveryVersion is TestSQLiteUpgradeFromEveryVersion on PostgreSQL.
func TestPostgresUpgradeFromEveryVersion(t *testing.T) {
	t.Parallel()
	ms, err := loadMigrations(migrations.Postgres())
	if err != nil {
		t.Fatal(err)
	}
	res, err := encodeResult(tool.TextResult("recorded before the upgrade"))
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n < len(ms); n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			url := pgtest.URL(t)
			conn, err := pgx.Connect(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := migrateUp(t.Context(), pgMigrations{conn}, ms[:n]); err != nil {
				t.Fatal(err)
			}
			at := time.Now()
			if _, err := conn.Exec(t.Context(), `INSERT INTO sessions (id, tenant, spec, created_at, updated_at) VALUES ('ses_before_upgrade', 'default', '{}', $1, $1)`, at); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(t.Context(), `INSERT INTO tool_calls (id, session_id, tenant, tool_call_id, name, arguments, status, result, created_at, started_at, finished_at)
				VALUES ($1, 'ses_before_upgrade', 'default', 'call_1', 'execute_command', '{"command":"true"}', 'succeeded', $2, $3, $3, $3)`,
				upgradeCall, string(res), at); err != nil {
				t.Fatal(err)
			}
			conn.Close(context.Background())
			s, err := OpenPostgres(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			checkUpgraded(t, s, n, ms)
		})
	}
}

// TestNewerSchemaReported: a database a newer binary migrated opens (a rolling
// deploy's old replica, a rollback), and Schema names the versions it does not know.
func TestNewerSchemaReported(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.db")
	s := openTestSQLite(t, path)
	latest := s.Schema().Binary
	if _, err := s.w.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'later', '')`, latest+2); err != nil {
		t.Fatal(err)
	}
	s.Close()
	sc := openTestSQLite(t, path).Schema()
	if sc.Version != latest+2 || sc.Binary != latest || sc.Applied != 0 || len(sc.Unknown) != 1 || sc.Unknown[0] != fmt.Sprintf("%04d_later", latest+2) {
		t.Fatalf("Schema() = %+v, want version %d, binary %d, unknown [%04d_later]", sc, latest+2, latest, latest+2)
	}
}
