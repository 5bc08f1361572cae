-- tool_chain artifacts and the replica that holds them. An artifact is a file in that
-- replica's data_dir; artifact_read on another replica looks its owner up here and
-- forwards the read there. A replica's rows go with it; retention deletes a session's
-- rows with it.

CREATE TABLE artifacts (
    ref        text PRIMARY KEY,
    session_id text NOT NULL,
    tenant     text NOT NULL,
    owner      text NOT NULL REFERENCES replicas (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL
);

CREATE INDEX artifacts_owner_idx ON artifacts (owner);
CREATE INDEX artifacts_session_idx ON artifacts (session_id);
