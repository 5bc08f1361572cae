-- A job's row outlives its replica's row (see the PostgreSQL migration). One machine,
-- one process: SQLite never fills jobs, but keeps the schemas parallel.

CREATE TABLE jobs_new (
    id         TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    owner      TEXT NOT NULL,
    created_at TEXT NOT NULL
);
INSERT INTO jobs_new (id, session_id, tenant, owner, created_at) SELECT id, session_id, tenant, owner, created_at FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE INDEX jobs_owner ON jobs (owner);
CREATE INDEX jobs_session_idx ON jobs (session_id);
