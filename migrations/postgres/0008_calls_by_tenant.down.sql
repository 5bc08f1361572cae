DROP INDEX IF EXISTS tool_calls_tenant_active_idx;
DROP INDEX IF EXISTS tool_calls_tenant_created_idx;
