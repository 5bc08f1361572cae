DROP TABLE IF EXISTS scratchpad;
DROP INDEX IF EXISTS memories_search_idx;
DROP INDEX IF EXISTS memories_tenant_created_idx;
DROP INDEX IF EXISTS memories_tenant_key_idx;
DROP TABLE IF EXISTS memories;
DROP INDEX IF EXISTS tasks_session_created_idx;
DROP TABLE IF EXISTS tasks;
