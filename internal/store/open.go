package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// SQLiteFileName is the database file created in Config.DataDir when no URL is given.
const SQLiteFileName = "toolserverd.db"

// Config selects and locates the store.
type Config struct {
	// URL is postgres://… or postgresql://… for PostgreSQL, sqlite:PATH for SQLite
	// (sqlite:///abs/path also works), or empty for SQLite in DataDir.
	URL string
	// DataDir holds toolserverd.db when URL is empty.
	DataDir string
	// SQLite tunes an SQLite store (ignored for PostgreSQL).
	SQLite SQLiteOptions
	// ConnectTimeout bounds Open's first connection to PostgreSQL (0: only ctx does),
	// so that a server that never answers (a lost route, a dropped SYN) fails the
	// attempt with ErrConnectTimeout, which IsUnreachable recognizes. The migrations
	// that follow are not bounded by it.
	ConnectTimeout time.Duration
}

type backend int

const (
	backendSQLite backend = iota
	backendPostgres
)

// target resolves c to a backend and its location.
func (c Config) target() (backend, string, error) {
	u := strings.TrimSpace(c.URL)
	lower := strings.ToLower(u)
	switch {
	case u == "":
		if c.DataDir == "" {
			return 0, "", errors.New("store: no url and no data dir: set one (sqlite goes to <data dir>/" + SQLiteFileName + ")")
		}
		return backendSQLite, filepath.Join(c.DataDir, SQLiteFileName), nil
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return backendPostgres, u, nil
	case strings.HasPrefix(lower, "sqlite:"):
		path := u[len("sqlite:"):]
		if strings.HasPrefix(path, "//") {
			// URL form: sqlite:///abs/path.db → /abs/path.db
			path = path[2:]
		}
		if path == "" {
			return 0, "", errors.New("store: url " + u + ": sqlite: needs a file path (sqlite:/var/lib/toolserverd/toolserverd.db)")
		}
		return backendSQLite, path, nil
	}
	scheme, _, ok := strings.Cut(u, ":")
	if !ok || strings.ContainsAny(scheme, "/ ") {
		return 0, "", errors.New("store: url has no scheme: want postgres://…, postgresql://… or sqlite:PATH")
	}
	return 0, "", fmt.Errorf("store: url scheme %q is not supported: want postgres://…, postgresql://… or sqlite:PATH", scheme)
}

// Validate reports a configuration Open would refuse, without opening anything.
func (c Config) Validate() error {
	if _, _, err := c.target(); err != nil {
		return err
	}
	return c.SQLite.Validate()
}

// unlockedError says an SQLite database was opened without its lock: the file system
// refused flock for another reason than another holder (ENOLCK, ENOTSUP on some
// network mounts), so nothing keeps a second daemon off it.
type unlockedError struct {
	path string
	err  error
}

func (e *unlockedError) Error() string {
	return fmt.Sprintf("the lock file %s cannot be locked (%v): nothing keeps a second toolserverd off this database; keep the data dir on a local file system", e.path, e.err)
}

func (e *unlockedError) Unwrap() error { return e.err }

// Open opens the configured store and applies pending migrations.
func Open(ctx context.Context, c Config) (Store, error) {
	b, loc, err := c.target()
	if err != nil {
		return nil, err
	}
	// A failed open returns a nil Store, not a Store holding a nil pointer, which the
	// caller's clean-up would Close (and panic).
	if b == backendPostgres {
		p, err := openPostgres(ctx, loc, c.ConnectTimeout)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	// Validate before taking the lock, so an invalid configuration is refused as such.
	if err := c.SQLite.Validate(); err != nil {
		return nil, err
	}
	// One process at a time: the daemon's start marks the calls its replica id left
	// running failed, which would be another live daemon's (see lockSQLite).
	// OpenSQLite does not lock: tests open one file several times.
	lock, err := lockSQLite(loc)
	var unlocked *unlockedError
	if errors.As(err, &unlocked) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	s, err := OpenSQLiteWith(ctx, loc, c.SQLite)
	if err != nil {
		if lock != nil {
			_ = lock.Close()
		}
		return nil, err
	}
	s.lock = lock
	if unlocked != nil {
		s.unlocked = unlocked
	}
	return s, nil
}
