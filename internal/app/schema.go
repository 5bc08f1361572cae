package app

import (
	"log/slog"
	"strings"

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
