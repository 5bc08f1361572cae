-- Retention deletes a session's job rows with it (see the PostgreSQL migration). One
-- machine, one process: SQLite never fills jobs, but keeps the schemas parallel.

CREATE INDEX jobs_session_idx ON jobs (session_id);
