-- A job's row outlives the row of the replica that ran it (forgotten by the others'
-- sweep once it stopped): the job tools of any replica then still know that the job
-- existed and where it ran, and say that it went with that replica, rather than that
-- the session never had such a job. Retention deletes a session's job rows with it.

ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_owner_fkey;
