DROP INDEX IF EXISTS tool_calls_owner_status_idx;
DROP INDEX IF EXISTS tool_calls_session_tool_call_id_idx;
DROP TABLE IF EXISTS tool_calls;
DROP TABLE IF EXISTS sessions;
