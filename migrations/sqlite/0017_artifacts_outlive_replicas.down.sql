CREATE TABLE artifacts_old (
    ref        TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    owner      TEXT NOT NULL REFERENCES replicas (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL
);
INSERT INTO artifacts_old (ref, session_id, tenant, owner, created_at)
    SELECT ref, session_id, tenant, owner, created_at FROM artifacts WHERE owner IN (SELECT id FROM replicas);
DROP TABLE artifacts;
ALTER TABLE artifacts_old RENAME TO artifacts;
CREATE INDEX artifacts_owner_idx ON artifacts (owner);
CREATE INDEX artifacts_session_idx ON artifacts (session_id);
