CREATE TABLE jobs_old (
    id         TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    owner      TEXT NOT NULL REFERENCES replicas (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL
);
INSERT INTO jobs_old (id, session_id, tenant, owner, created_at)
    SELECT id, session_id, tenant, owner, created_at FROM jobs WHERE owner IN (SELECT id FROM replicas);
DROP TABLE jobs;
ALTER TABLE jobs_old RENAME TO jobs;
CREATE INDEX jobs_owner ON jobs (owner);
CREATE INDEX jobs_session_idx ON jobs (session_id);
