package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
)

// logSchema says what opening the store did to its schema: the versions it migrated
// from and to, or the version it found; and warns when a newer toolserverd migrated it
// (a downgrade, or an old replica of a rolling deploy starting again), naming the
// migrations this binary does not have. That is a warning, not a refusal: migrations
// only add, so this binary works on the newer schema, and refusing would stop a
// rolling deploy's old replicas (and a rollback) from starting.
func logSchema(log *slog.Logger, s store.Store) {
	r, ok := s.(store.SchemaReporter)
	if !ok {
		return
	}
	sc := r.Schema()
	if len(sc.Unknown) > 0 {
		log.Warn("the store's schema is newer than this binary", "version", sc.Version, "binary", sc.Binary,
			"unknown", strings.Join(sc.Unknown, ","),
			"effect", "a newer toolserverd migrated this database; this binary runs on it, without what those migrations are for; upgrade it (see README, Upgrading)")
	}
	if sc.Applied > 0 {
		log.Info("store schema migrated", "from", sc.From, "to", sc.Version, "applied", sc.Applied)
		return
	}
	log.Info("store schema", "version", sc.Version, "binary", sc.Binary)
}

// schemaInfo is /readyz's info.schema: the version the store's schema is at, and the
// highest this binary has (lower than version: a newer toolserverd migrated it).
func schemaInfo(s store.Store) map[string]int {
	r, ok := s.(store.SchemaReporter)
	if !ok {
		return nil
	}
	sc := r.Schema()
	return map[string]int{"version": sc.Version, "binary": sc.Binary}
}

// warnUnlockedDatabase warns when the SQLite database could not be locked (a file
// system without flock): a second daemon started on it would not be refused.
func warnUnlockedDatabase(log *slog.Logger, s store.Store) {
	if u, ok := s.(interface{ Unlocked() error }); ok && u.Unlocked() != nil {
		log.Warn("the store's database is not locked", "err", u.Unlocked().Error())
	}
}

// warnReadableDatabase warns when the SQLite database can be read by users other than
// the daemon's: it holds every call's arguments and results. One this release made is
// 0600; an older release's kept the umask's mode (0644 by default), which the daemon
// does not change on its own (an operator may have set it on purpose).
func warnReadableDatabase(log *slog.Logger, s store.Store) {
	p, ok := s.(interface{ Path() string })
	if !ok {
		return
	}
	fi, err := os.Stat(p.Path())
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	log.Warn("the store's database file can be read by other users", "path", p.Path(), "mode", fmt.Sprintf("%04o", fi.Mode().Perm()),
		"effect", "it holds every call's arguments and results; make it private: chmod 600 "+p.Path()+"*")
}

// Migrate opens the configured store, which applies the migrations its database lacks
// (under the same lock as a starting daemon's, so it may run beside live replicas), logs
// what that did to the schema, and closes it. Nothing else a start does happens: no
// replica id is claimed and no call is recovered. An unreachable PostgreSQL is tried
// again for store_connect_timeout, as at start.
func Migrate(ctx context.Context, cfg config.Config, log *slog.Logger) (store.Schema, error) {
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return store.Schema{}, fmt.Errorf("data_dir: %w", err)
	}
	if strings.TrimSpace(cfg.Store) == "" {
		// The database goes in the data dir; a PostgreSQL store needs no local directory
		// (a migration job may run on a read-only file system).
		if err := os.MkdirAll(dataDir, 0o750); err != nil {
			return store.Schema{}, fmt.Errorf("data_dir: %w", err)
		}
	}
	s, err := openStore(ctx, store.Config{URL: cfg.Store, DataDir: dataDir,
		SQLite: store.SQLiteOptions{Synchronous: cfg.SQLite.Synchronous}}, cfg.StoreConnectTimeout, log)
	if err != nil {
		return store.Schema{}, err
	}
	defer s.Close()
	logSchema(log, s)
	warnReadableDatabase(log, s)
	warnUnlockedDatabase(log, s)
	var sc store.Schema
	if r, ok := s.(store.SchemaReporter); ok {
		sc = r.Schema()
	}
	return sc, nil
}

// sqliteFiles names the files of an SQLite store: its database (where a symbolic link
// leads, as SQLite opens that one), the WAL, shared memory and rollback journal beside
// it, and the lock file the daemon holds; none for another store.
func sqliteFiles(s store.Store) []string {
	p, ok := s.(interface{ Path() string })
	if !ok || p.Path() == "" {
		return nil
	}
	db := p.Path()
	if real, err := filepath.EvalSymlinks(db); err == nil {
		db = real
	}
	return []string{db, db + "-wal", db + "-shm", db + "-journal", db + ".lock"}
}
