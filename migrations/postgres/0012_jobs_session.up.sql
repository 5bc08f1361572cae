-- Retention (retention.sessions) deletes a session's job rows with it, by session_id.
-- Without this index every session deleted read the whole jobs table.

CREATE INDEX jobs_session_idx ON jobs (session_id);
