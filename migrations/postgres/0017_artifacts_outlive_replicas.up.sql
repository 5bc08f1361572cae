-- An artifact's row outlives the row of the replica that holds its file (forgotten by
-- the others' sweep once it stopped), as a job's does (0016): artifact_read through
-- another replica then says the artifact is that replica's and out of reach while it
-- is away, and reads it from there once it is back under its id with its data_dir,
-- rather than saying the session never had it. Retention deletes a session's rows
-- with it.

ALTER TABLE artifacts DROP CONSTRAINT IF EXISTS artifacts_owner_fkey;
