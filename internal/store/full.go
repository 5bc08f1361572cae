package store

import (
	"errors"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	sqlite3 "modernc.org/sqlite/lib"
)

// IsStorageFull reports whether err says the store ran out of space: SQLite's
// SQLITE_FULL, PostgreSQL's disk_full (53100), or ENOSPC from the file system. The
// write did not happen; it may be retried once space is freed.
func IsStorageFull(err error) bool {
	if err == nil {
		return false
	}
	if sqliteErrCode(err)&0xff == sqlite3.SQLITE_FULL || errors.Is(err, syscall.ENOSPC) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53100"
}
