package migrations_test

import (
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/migrations"
)

var fileName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.(up|down)\.sql$`)

// TestLayout checks what the migrator relies on: every file is named NNNN_name.up|down.sql,
// every up has its down, numbers run from 1 without gaps, and both dialects have the
// same list of migrations.
func TestLayout(t *testing.T) {
	t.Parallel()
	lists := map[string][]string{}
	for name, fsys := range map[string]fs.FS{"sqlite": migrations.SQLite(), "postgres": migrations.Postgres()} {
		entries, err := fs.ReadDir(fsys, ".")
		if err != nil {
			t.Fatalf("%s: read dir: %v", name, err)
		}
		if len(entries) == 0 {
			t.Fatalf("%s: no migrations embedded", name)
		}
		ups := map[int]string{}
		downs := map[int]string{}
		for _, e := range entries {
			m := fileName.FindStringSubmatch(e.Name())
			if m == nil {
				t.Errorf("%s: %q does not match NNNN_name.(up|down).sql", name, e.Name())
				continue
			}
			v, _ := strconv.Atoi(m[1])
			b, err := fs.ReadFile(fsys, e.Name())
			if err != nil {
				t.Fatalf("%s: read %s: %v", name, e.Name(), err)
			}
			if strings.TrimSpace(string(b)) == "" {
				t.Errorf("%s: %s is empty", name, e.Name())
			}
			target := ups
			if m[3] == "down" {
				target = downs
			}
			if prev, dup := target[v]; dup {
				t.Errorf("%s: version %d has two %s files: %s and %s", name, v, m[3], prev, m[2])
			}
			target[v] = m[2]
		}
		for v := 1; v <= len(ups); v++ {
			up, ok := ups[v]
			if !ok {
				t.Errorf("%s: missing up migration %04d (numbers must not have gaps)", name, v)
				continue
			}
			if downs[v] != up {
				t.Errorf("%s: migration %04d_%s has no matching down file", name, v, up)
			}
			lists[name] = append(lists[name], up)
		}
		if len(downs) != len(ups) {
			t.Errorf("%s: %d up files but %d down files", name, len(ups), len(downs))
		}
	}
	if strings.Join(lists["sqlite"], ",") != strings.Join(lists["postgres"], ",") {
		t.Errorf("dialects differ: sqlite %v, postgres %v", lists["sqlite"], lists["postgres"])
	}
}

// Statements a PostgreSQL up migration must not hold: replicas of the previous version
// keep running on the database while a new one migrates it (a rolling deploy), and an
// older binary may be started on it again (a rollback), so a migration only adds
// (tables, nullable or defaulted columns, indexes) or relaxes (drops an index or a
// constraint). Each names what an old replica would hit.
var breaksOldReplicas = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`(?is)\bDROP\s+TABLE\b`), "drops a table old replicas read and write"},
	{regexp.MustCompile(`(?is)\bDROP\s+(COLUMN\b|[a-z_]+\s*;)`), "drops a column old replicas name"},
	{regexp.MustCompile(`(?is)\bALTER\s+TABLE\s+\S+\s+DROP\s+(?:IF\s+EXISTS\s+)?[a-z_]+\s*(?:,|;|CASCADE|RESTRICT)`), "drops a column old replicas name"},
	{regexp.MustCompile(`(?is)\bRENAME\b`), "renames what old replicas name"},
	{regexp.MustCompile(`(?is)\bALTER\s+COLUMN\b[^;]*\b(TYPE|SET\s+NOT\s+NULL)\b`), "changes a column old replicas write"},
	// PostgreSQL lets ALTER stand without COLUMN: ALTER TABLE t ALTER c TYPE int.
	{regexp.MustCompile(`(?is)\bALTER\s+[a-z_"]+\s+(?:SET\s+DATA\s+)?(?:TYPE|SET\s+NOT\s+NULL)\b`), "changes a column old replicas write"},
	{regexp.MustCompile(`(?is)\bADD\s+(CONSTRAINT|CHECK|UNIQUE|PRIMARY\s+KEY|FOREIGN\s+KEY)\b`), "adds a constraint old replicas' writes may break"},
}

// uniqueIndexOn matches a unique index and names its table: on a table the same
// migration creates it is part of the new table, on an existing one a new constraint.
var uniqueIndexOn = regexp.MustCompile(`(?is)\bCREATE\s+UNIQUE\s+INDEX\b[^;]*?\bON\s+([a-z_]+)`)

var createTable = regexp.MustCompile(`(?is)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_]+)`)

// addsColumn matches ADD COLUMN … NOT NULL without a DEFAULT: old replicas'
// inserts do not name the column and would fail.
var addsColumn = regexp.MustCompile(`(?is)\bADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?[^;,]*`)

// incompatible says why an up migration's SQL would break replicas of the previous
// version sharing the database, or "" if it only adds.
func incompatible(sql string) string {
	var b strings.Builder
	for _, l := range strings.Split(sql, "\n") {
		l, _, _ = strings.Cut(l, "--")
		b.WriteString(l + "\n")
	}
	code := b.String()
	for _, r := range breaksOldReplicas {
		if m := r.re.FindString(code); m != "" && !strings.Contains(strings.ToUpper(m), "DROP CONSTRAINT") && !strings.Contains(strings.ToUpper(m), "DROP INDEX") {
			return r.what + ": " + strings.Join(strings.Fields(m), " ")
		}
	}
	created := map[string]bool{}
	for _, m := range createTable.FindAllStringSubmatch(code, -1) {
		created[strings.ToLower(m[1])] = true
	}
	for _, m := range uniqueIndexOn.FindAllStringSubmatch(code, -1) {
		if !created[strings.ToLower(m[1])] {
			return "adds a unique index (a constraint) old replicas' writes may break: " + strings.Join(strings.Fields(m[0]), " ")
		}
	}
	for _, m := range addsColumn.FindAllString(code, -1) {
		u := strings.ToUpper(m)
		if strings.HasPrefix(strings.Fields(u)[1], "CONSTRAINT") {
			continue
		}
		if strings.Contains(u, "NOT NULL") && !strings.Contains(u, "DEFAULT") {
			return "adds a NOT NULL column without a default, which old replicas' inserts leave out: " + strings.Join(strings.Fields(m), " ")
		}
	}
	return ""
}

// TestPostgresMigrationsOnlyAdd: every PostgreSQL up migration keeps the previous
// version working on the migrated database (README, Upgrading); the checker itself
// refuses what would not.
func TestPostgresMigrationsOnlyAdd(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"DROP TABLE jobs;",
		"ALTER TABLE tool_calls DROP COLUMN owner;",
		"ALTER TABLE tool_calls DROP owner;",
		"ALTER TABLE jobs RENAME TO jobs_old;",
		"ALTER TABLE tool_calls RENAME COLUMN owner TO replica;",
		"ALTER TABLE tool_calls ALTER COLUMN name TYPE varchar(100);",
		"ALTER TABLE tool_calls ALTER COLUMN arguments SET NOT NULL;",
		// COLUMN is optional after ALTER in PostgreSQL.
		"ALTER TABLE tool_calls ALTER name TYPE varchar(100);",
		"ALTER TABLE tool_calls ALTER arguments SET NOT NULL;",
		"ALTER TABLE tool_calls ALTER COLUMN name SET DATA TYPE varchar(100);",
		"ALTER TABLE tool_calls ADD COLUMN region text NOT NULL;",
		"ALTER TABLE tool_calls ADD CONSTRAINT name_short CHECK (length(name) < 64);",
		"CREATE UNIQUE INDEX x ON tool_calls (session_id, tool_call_id);",
	} {
		if incompatible(bad) == "" {
			t.Errorf("the checker passes %q", bad)
		}
	}
	for _, ok := range []string{
		"ALTER TABLE tool_calls ADD COLUMN output_open BOOLEAN NOT NULL DEFAULT FALSE;",
		"ALTER TABLE tool_calls ADD COLUMN note text;",
		"ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_owner_fkey;",
		"DROP INDEX IF EXISTS tool_calls_owner_status_idx;\nCREATE INDEX a ON b (c);",
		"-- DROP TABLE in a comment\nCREATE TABLE t (id text PRIMARY KEY);",
		"CREATE TABLE m (k text);\nCREATE UNIQUE INDEX m_k ON m (k);",
	} {
		if why := incompatible(ok); why != "" {
			t.Errorf("the checker refuses %q: %s", ok, why)
		}
	}
	fsys := migrations.Postgres()
	names, err := fs.Glob(fsys, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			t.Fatal(err)
		}
		if why := incompatible(string(b)); why != "" {
			t.Errorf("%s %s: replicas of the previous version share the database during a rolling deploy; add instead (a new column with a default, a new table) and stop using the old one in a later release", n, why)
		}
	}
}
