-- tool_chain artifacts and the replica that holds them (see the PostgreSQL
-- migration). One machine, one process: SQLite never fills it, but keeps the schemas
-- parallel.

CREATE TABLE artifacts (
    ref        TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    owner      TEXT NOT NULL REFERENCES replicas (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL
);

CREATE INDEX artifacts_owner_idx ON artifacts (owner);
CREATE INDEX artifacts_session_idx ON artifacts (session_id);
