-- Replicas sharing this database. Each one heartbeats its row every lease/3; the
-- survivors fail the unfinished calls of a replica whose last_seen is older than the
-- lease. address is the replica's advertised base URL, where the others forward
-- progress reads of the calls it runs.

CREATE TABLE replicas (
    id         text PRIMARY KEY,
    address    text NOT NULL,
    started_at timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL
);
