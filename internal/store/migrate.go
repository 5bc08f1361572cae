package store

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
)

// migration is one numbered schema change, read from the embedded migrations package.
type migration struct {
	Version int
	Name    string
	Up      string
	Down    string
}

var migrationFile = regexp.MustCompile(`^(\d+)_([A-Za-z0-9_]+)\.(up|down)\.sql$`)

// loadMigrations reads NNNN_name.up.sql / NNNN_name.down.sql pairs from the root of
// fsys, in version order. Every up needs its down; other files are an error, so a
// misnamed file cannot be skipped silently.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int]*migration{}
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.up.sql or NNNN_name.down.sql", e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %q: bad version", e.Name())
		}
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		mg := byVersion[v]
		if mg == nil {
			mg = &migration{Version: v, Name: m[2]}
			byVersion[v] = mg
		}
		if mg.Name != m[2] {
			return nil, fmt.Errorf("migration %d has two names: %s and %s", v, mg.Name, m[2])
		}
		if m[3] == "up" {
			mg.Up = string(body)
		} else {
			mg.Down = string(body)
		}
	}
	out := make([]migration, 0, len(byVersion))
	for _, mg := range byVersion {
		if mg.Up == "" || mg.Down == "" {
			return nil, fmt.Errorf("migration %04d_%s needs both an up and a down file", mg.Version, mg.Name)
		}
		out = append(out, *mg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// migrationTarget is what a dialect gives the migrator. The caller holds whatever lock
// the dialect needs across calls; step re-checks inside its transaction anyway, so two
// processes racing on a dialect without a lock (SQLite: BEGIN IMMEDIATE serializes
// them) still apply each migration once.
type migrationTarget interface {
	// ensureTable creates schema_migrations if it does not exist.
	ensureTable(ctx context.Context) error
	// applied returns the recorded versions, each with its name.
	applied(ctx context.Context) (map[int]string, error)
	// step applies m (up) or reverts it (down) and records that, in one transaction.
	// It does nothing when schema_migrations already says the work is done.
	step(ctx context.Context, m migration, up bool) error
}

// Schema is what opening a store found and did to its schema: the daemon logs it and
// /readyz shows it, so that an operator sees an upgrade migrate and a downgrade run on a
// schema newer than it knows.
type Schema struct {
	// From is the highest version recorded before this open (0: a new database).
	From int
	// Version is the highest version recorded now.
	Version int
	// Binary is the highest version this binary has.
	Binary int
	// Applied is how many migrations this open applied (or found applied meanwhile by
	// another process opening the same database).
	Applied int
	// Unknown names the recorded versions this binary does not have (a newer toolserverd
	// migrated the database), as NNNN_name, in version order.
	Unknown []string
}

// SchemaReporter is a store that tells what its opening did to the schema (SQLite and
// Postgres). It is separate from Store so the Store contract stays as it was declared.
type SchemaReporter interface {
	Schema() Schema
}

var (
	_ SchemaReporter = (*SQLite)(nil)
	_ SchemaReporter = (*Postgres)(nil)
)

// migrateUp applies every migration not yet recorded, in version order, each in its own
// transaction, and says what it found and did. Versions recorded in the database but
// unknown to this binary (a newer binary migrated it) are left alone: migrations only
// add (see the migrations package), so this binary still works on that schema, and a
// rolling deploy's old replicas keep running while a new one migrates; Schema.Unknown
// lets the daemon warn of it.
func migrateUp(ctx context.Context, t migrationTarget, ms []migration) (Schema, error) {
	var sc Schema
	if err := t.ensureTable(ctx); err != nil {
		return sc, fmt.Errorf("create schema_migrations: %w", err)
	}
	done, err := t.applied(ctx)
	if err != nil {
		return sc, fmt.Errorf("read schema_migrations: %w", err)
	}
	known := make(map[int]bool, len(ms))
	for _, m := range ms {
		known[m.Version] = true
		sc.Binary = max(sc.Binary, m.Version)
	}
	var unknown []int
	for v := range done {
		sc.From = max(sc.From, v)
		if !known[v] {
			unknown = append(unknown, v)
		}
	}
	sort.Ints(unknown)
	for _, v := range unknown {
		sc.Unknown = append(sc.Unknown, fmt.Sprintf("%04d_%s", v, done[v]))
	}
	sc.Version = sc.From
	for _, m := range ms {
		if _, ok := done[m.Version]; ok {
			continue
		}
		if err := t.step(ctx, m, true); err != nil {
			return sc, fmt.Errorf("migration %04d_%s up: %w", m.Version, m.Name, err)
		}
		sc.Applied++
		sc.Version = max(sc.Version, m.Version)
	}
	return sc, nil
}

// migrateDown reverts, newest first, every applied migration above target.
func migrateDown(ctx context.Context, t migrationTarget, ms []migration, target int) (int, error) {
	if err := t.ensureTable(ctx); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	done, err := t.applied(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema_migrations: %w", err)
	}
	n := 0
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		if _, ok := done[m.Version]; m.Version <= target || !ok {
			continue
		}
		if err := t.step(ctx, m, false); err != nil {
			return n, fmt.Errorf("migration %04d_%s down: %w", m.Version, m.Name, err)
		}
		n++
	}
	return n, nil
}
