DROP INDEX IF EXISTS tool_calls_owner_active_idx;
CREATE INDEX tool_calls_owner_status_idx ON tool_calls (owner, status);
