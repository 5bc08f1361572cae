-- Background jobs and the replica that runs them. A job's process and output logs
-- live on that replica only; another replica that gets a request about the job looks
-- its owner up here and forwards the request there. A replica's rows go with it.

CREATE TABLE jobs (
    id         text PRIMARY KEY,
    session_id text NOT NULL,
    tenant     text NOT NULL,
    owner      text NOT NULL REFERENCES replicas (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL
);

CREATE INDEX jobs_owner ON jobs (owner);
