-- Background jobs and the replica that runs them (see the PostgreSQL migration). One
-- machine, one process: SQLite never fills it, but keeps the schemas parallel.

CREATE TABLE jobs (
    id         TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    owner      TEXT NOT NULL REFERENCES replicas (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL
);

CREATE INDEX jobs_owner ON jobs (owner);
