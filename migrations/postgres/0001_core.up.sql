-- Sessions and tool-call records.
-- Names are unqualified: the tables go into the first schema of search_path.
-- JSON columns are json, not jsonb: the store keeps the exact bytes it was given
-- (a model's arguments, a session spec) and never queries inside them.

CREATE TABLE sessions (
    id         text PRIMARY KEY,
    tenant     text NOT NULL,
    spec       json,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE tool_calls (
    id           text PRIMARY KEY,
    session_id   text NOT NULL,
    tenant       text NOT NULL,
    tool_call_id text NOT NULL,
    name         text NOT NULL,
    arguments    json,
    status       text NOT NULL,
    result       json,
    error_kind   text NOT NULL DEFAULT '',
    owner        text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    started_at   timestamptz,
    finished_at  timestamptz
);

CREATE INDEX tool_calls_session_tool_call_id_idx ON tool_calls (session_id, tool_call_id, created_at);
CREATE INDEX tool_calls_owner_status_idx ON tool_calls (owner, status);
