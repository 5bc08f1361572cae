-- Retention (retention.calls, retention.sessions) deletes finished call records by
-- finished_at and unused sessions by updated_at, a bounded batch at a time, and a
-- session's approvals with it. Without these indexes every batch read the whole table.
-- A call still active has no finished_at: it enters the first index when it finishes.

CREATE INDEX tool_calls_finished_idx ON tool_calls (finished_at);
CREATE INDEX sessions_updated_idx ON sessions (updated_at, id);
CREATE INDEX approvals_session_idx ON approvals (session_id);
