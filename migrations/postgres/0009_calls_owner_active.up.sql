-- Crash recovery and the replica sweep look for a replica's unfinished calls
-- (owner = ? AND status IN ('pending', 'running')). The index they used held every call
-- ever recorded, so each record paid for one more index entry; this one holds only the
-- unfinished calls: a call recorded already finished (a read-only call is written once,
-- in its final state) never enters it, and a running one leaves it when it finishes.
DROP INDEX IF EXISTS tool_calls_owner_status_idx;
CREATE INDEX tool_calls_owner_active_idx ON tool_calls (owner) WHERE status IN ('pending', 'running');
