DROP INDEX IF EXISTS jobs_session_idx;
