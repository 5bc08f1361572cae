-- A call whose output goes on after its result (execute_command with background: true)
-- is finished, yet still live: output_open (0/1) says so (see the PostgreSQL migration).

ALTER TABLE tool_calls ADD COLUMN output_open INTEGER NOT NULL DEFAULT 0;

-- The live listing asks for calls that are active or whose output is open; queries
-- repeat this WHERE word for word so that SQLite uses the index.
DROP INDEX IF EXISTS tool_calls_tenant_active_idx;
CREATE INDEX tool_calls_tenant_active_idx ON tool_calls (tenant, created_at, id)
    WHERE (status IN ('pending', 'running', 'waiting') OR output_open);

CREATE INDEX tool_calls_owner_output_open_idx ON tool_calls (owner) WHERE output_open;
