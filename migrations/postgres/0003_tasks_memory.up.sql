-- Session task lists, long-term memories with full-text search, session scratchpads.
-- blocked_by and tags are jsonb (read as a whole, small, indexed into the tsvector);
-- metadata is json like the JSON columns of 0001: the exact bytes the store was given.

CREATE TABLE tasks (
    seq         bigint GENERATED ALWAYS AS IDENTITY, -- insertion order for ties
    id          text PRIMARY KEY,
    tenant      text NOT NULL,
    session_id  text NOT NULL,
    subject     text NOT NULL,
    description text NOT NULL DEFAULT '',
    status      text NOT NULL CHECK (status IN ('pending', 'in_progress', 'completed', 'cancelled')),
    owner       text NOT NULL DEFAULT '',
    blocked_by  jsonb NOT NULL DEFAULT '[]', -- array of task ids of the same session
    metadata    json,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE INDEX tasks_session_created_idx ON tasks (session_id, created_at);

-- search is maintained by PostgreSQL: key (weight A), tag strings (B), content (C),
-- English stemming. ts_rank_cd ranks matches.
CREATE TABLE memories (
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    id         text PRIMARY KEY,
    tenant     text NOT NULL,
    session_id text NOT NULL, -- the session that saved it
    key        text,          -- optional; unique per tenant, saving it again replaces
    content    text NOT NULL,
    tags       jsonb NOT NULL DEFAULT '[]',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    search     tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english'::regconfig, coalesce(key, '')), 'A') ||
        setweight(jsonb_to_tsvector('english'::regconfig, tags, '["string"]'), 'B') ||
        setweight(to_tsvector('english'::regconfig, content), 'C')
    ) STORED
);

CREATE UNIQUE INDEX memories_tenant_key_idx ON memories (tenant, key) WHERE key IS NOT NULL;
CREATE INDEX memories_tenant_created_idx ON memories (tenant, created_at);
CREATE INDEX memories_search_idx ON memories USING gin (search);

CREATE TABLE scratchpad (
    session_id text NOT NULL,
    key        text NOT NULL,
    value      text NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, key)
);
