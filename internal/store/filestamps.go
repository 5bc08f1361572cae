package store

import (
	"context"
	"time"
)

// FileStamp is what a session's file tools saw of a file: its size, its modification
// time and, when they read it whole, the SHA-256 of its content (nil otherwise).
type FileStamp struct {
	Size    int64
	ModTime time.Time
	SHA256  []byte
}

// FileStampStore keeps the file stamps of sessions (the file_stamps table), so that
// a file one replica's read_file saw may be replaced by a write_file the session
// sends to another (PostgreSQL), and so that a call waiting for approval when the
// daemon restarts may still replace the file it was checked against (both stores). A
// session's stamps go with it (DeleteUnusedSession: deletion and retention).
//
// What the table holds differs. PostgreSQL: every stamp of every session, each read
// and write writes one. SQLite (one process, whose memory holds the rest; the
// comment of migration 0014 saying SQLite never fills the table predates this): the
// stamp a write or edit was checked against when it parked for approval, and, once a
// file has such a stamp, the session's later stamps of that file (so a restart never
// checks a write against a stamp older than what the session saw last); a plain
// read_file writes nothing. A failed write is logged by the daemon (builtin.Stamps.Log).
type FileStampStore interface {
	// PutFileStamp records the stamp of path (the file's physical absolute path) for
	// the session, replacing the one there was. It fails with ErrInvalid when the
	// session or path is empty.
	PutFileStamp(ctx context.Context, sessionID, path string, s FileStamp) error
	// GetFileStamp returns ErrNotFound when the session has no stamp of path.
	GetFileStamp(ctx context.Context, sessionID, path string) (*FileStamp, error)
	// FileStampPaths returns the paths the session has a stamp of, in no order.
	FileStampPaths(ctx context.Context, sessionID string) ([]string, error)
}
