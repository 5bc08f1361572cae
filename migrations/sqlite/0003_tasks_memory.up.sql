-- Session task lists, long-term memories with full-text search, session scratchpads.
-- Timestamps and JSON follow 0001: fixed-width UTC text, JSON as the bytes written.
-- tasks and memories have an INTEGER PRIMARY KEY (seq) besides their text id: it keeps
-- insertion order for ties, and the FTS index of memories refers to rows by it (an
-- implicit rowid could change on VACUUM and silently break the index).

CREATE TABLE tasks (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    tenant      TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    subject     TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL CHECK (status IN ('pending', 'in_progress', 'completed', 'cancelled')),
    owner       TEXT NOT NULL DEFAULT '',
    blocked_by  TEXT NOT NULL DEFAULT '[]', -- JSON array of task ids of the same session
    metadata    TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE INDEX tasks_session_created_idx ON tasks (session_id, created_at);

CREATE TABLE memories (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    tenant     TEXT NOT NULL,
    session_id TEXT NOT NULL, -- the session that saved it
    key        TEXT,          -- optional; unique per tenant, saving it again replaces
    content    TEXT NOT NULL,
    tags       TEXT NOT NULL DEFAULT '[]', -- JSON array of strings
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE UNIQUE INDEX memories_tenant_key_idx ON memories (tenant, key) WHERE key IS NOT NULL;
CREATE INDEX memories_tenant_created_idx ON memories (tenant, created_at);

-- External-content FTS5 index over key, content and tags (the JSON text of the tags
-- tokenizes into the tag words). Porter stemming: "migrations" finds "migration".
CREATE VIRTUAL TABLE memories_fts USING fts5(
    key, content, tags,
    content = 'memories',
    content_rowid = 'seq',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, key, content, tags) VALUES (new.seq, new.key, new.content, new.tags);
END;

CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, key, content, tags) VALUES ('delete', old.seq, old.key, old.content, old.tags);
END;

CREATE TRIGGER memories_fts_update AFTER UPDATE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, key, content, tags) VALUES ('delete', old.seq, old.key, old.content, old.tags);
    INSERT INTO memories_fts (rowid, key, content, tags) VALUES (new.seq, new.key, new.content, new.tags);
END;

CREATE TABLE scratchpad (
    session_id TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
