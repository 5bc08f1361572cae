-- Replicas sharing this database (see the PostgreSQL migration). One machine, one
-- process: SQLite never fills it, but keeps the schemas parallel.

CREATE TABLE replicas (
    id         TEXT PRIMARY KEY NOT NULL,
    address    TEXT NOT NULL,
    started_at TEXT NOT NULL,
    last_seen  TEXT NOT NULL
);
