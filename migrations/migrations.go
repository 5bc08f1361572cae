// Package migrations holds the database schema as numbered up/down SQL files, one
// directory per dialect, embedded in the binary. internal/store applies them.
//
// A file is named NNNN_name.up.sql or NNNN_name.down.sql; every up file has a down
// file with the same number and name, and numbers start at 1 with no gaps. The
// migrator applies each file in its own transaction, so a file must not contain
// statements that cannot run inside one (CREATE INDEX CONCURRENTLY, VACUUM).
// To extend the schema, add the next number in both directories.
//
// Migrations only add (tables, columns that are nullable or have a default, indexes) or
// relax (drop an index or a constraint): replicas of the previous version keep running
// on a PostgreSQL database while a new one migrates it (a rolling deploy), and an older
// binary may start on it again (a rollback), which then warns that the schema is newer
// than it. Stop using a column in one release and leave it; never rename or drop one in
// use. TestPostgresMigrationsOnlyAdd checks the PostgreSQL files. Migrations already
// released are never edited: add a new one.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed sqlite/*.sql
var sqliteFiles embed.FS

//go:embed postgres/*.sql
var postgresFiles embed.FS

// SQLite returns the SQLite migrations; file names are at the root of the FS.
func SQLite() fs.FS { return sub(sqliteFiles, "sqlite") }

// Postgres returns the PostgreSQL migrations; file names are at the root of the FS.
func Postgres() fs.FS { return sub(postgresFiles, "postgres") }

func sub(f embed.FS, dir string) fs.FS {
	s, err := fs.Sub(f, dir)
	if err != nil {
		// fs.Sub fails only for an invalid path; dir is a constant.
		panic(err)
	}
	return s
}
