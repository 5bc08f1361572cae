DROP INDEX IF EXISTS approvals_session_idx;
DROP INDEX IF EXISTS sessions_updated_idx;
