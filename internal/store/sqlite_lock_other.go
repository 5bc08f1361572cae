//go:build !unix

package store

import "os"

// lockSQLite does nothing where flock is missing: the database is opened unlocked.
func lockSQLite(string) (*os.File, error) { return nil, nil }
