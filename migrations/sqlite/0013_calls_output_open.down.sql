DROP INDEX IF EXISTS tool_calls_owner_output_open_idx;
DROP INDEX IF EXISTS tool_calls_tenant_active_idx;
CREATE INDEX tool_calls_tenant_active_idx ON tool_calls (tenant, created_at, id)
    WHERE status IN ('pending', 'running', 'waiting');
ALTER TABLE tool_calls DROP COLUMN output_open;
