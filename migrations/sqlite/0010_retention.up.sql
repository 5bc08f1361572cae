-- Retention (retention.sessions) deletes unused sessions by updated_at, a bounded
-- batch at a time, and a session's approvals with it. Without these indexes every
-- batch read the whole table. (Finished calls are found through
-- tool_calls_tenant_created_idx: an index on finished_at would cost every call
-- record one more index entry.)

CREATE INDEX sessions_updated_idx ON sessions (updated_at, id);
CREATE INDEX approvals_session_idx ON approvals (session_id);
