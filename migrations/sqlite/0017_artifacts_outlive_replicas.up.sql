-- An artifact's row outlives its replica's row (see the PostgreSQL migration). One
-- machine, one process: SQLite never fills artifacts, but keeps the schemas parallel.

CREATE TABLE artifacts_new (
    ref        TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    owner      TEXT NOT NULL,
    created_at TEXT NOT NULL
);
INSERT INTO artifacts_new (ref, session_id, tenant, owner, created_at) SELECT ref, session_id, tenant, owner, created_at FROM artifacts;
DROP TABLE artifacts;
ALTER TABLE artifacts_new RENAME TO artifacts;
CREATE INDEX artifacts_owner_idx ON artifacts (owner);
CREATE INDEX artifacts_session_idx ON artifacts (session_id);
