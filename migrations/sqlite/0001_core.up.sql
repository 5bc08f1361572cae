-- Sessions and tool-call records.
-- Timestamps are TEXT in UTC with microsecond precision, fixed width
-- ('2006-01-02T15:04:05.000000Z'), so they sort as text and read well in the sqlite3 shell.
-- JSON columns hold the bytes the application wrote (NULL for none).

CREATE TABLE sessions (
    id         TEXT PRIMARY KEY NOT NULL,
    tenant     TEXT NOT NULL,
    spec       TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE tool_calls (
    id           TEXT PRIMARY KEY NOT NULL,
    session_id   TEXT NOT NULL,
    tenant       TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    name         TEXT NOT NULL,
    arguments    TEXT,
    status       TEXT NOT NULL,
    result       TEXT,
    error_kind   TEXT NOT NULL DEFAULT '',
    owner        TEXT NOT NULL DEFAULT '',
    created_at   TEXT NOT NULL,
    started_at   TEXT,
    finished_at  TEXT
);

CREATE INDEX tool_calls_session_tool_call_id_idx ON tool_calls (session_id, tool_call_id, created_at);
CREATE INDEX tool_calls_owner_status_idx ON tool_calls (owner, status);
