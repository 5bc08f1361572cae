-- What each session's file tools have seen of a file, shared by the replicas of a
-- PostgreSQL store (see the PostgreSQL migration). One machine, one process: SQLite
-- never fills it, but keeps the schemas parallel.

CREATE TABLE file_stamps (
    session_id TEXT NOT NULL,
    path       BLOB NOT NULL,
    size       INTEGER NOT NULL,
    mtime_ns   INTEGER NOT NULL,
    sha256     BLOB,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (session_id, path)
);
