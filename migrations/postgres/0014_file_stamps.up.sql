-- What each session's file tools have seen of a file (read_file, json_read, or the
-- session's own last write): its size, modification time and, when it was read whole,
-- its SHA-256. write_file and edit_file refuse to replace a file the session has not
-- seen as it is now. The calls of one session may land on any replica, so a read on
-- one must count for a write on another: the stamps are kept here, not only in the
-- memory of the replica that read. Retention deletes a session's rows with it.

CREATE TABLE file_stamps (
    session_id text NOT NULL,
    path       bytea NOT NULL,
    size       bigint NOT NULL,
    mtime_ns   bigint NOT NULL,
    sha256     bytea,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, path)
);
