-- A call whose output goes on after its result (execute_command with background: true
-- answers at once with a job id; the job's output streams under the call until the job
-- ends) is finished, yet still live. output_open says so on the record, so that any
-- replica can list it: it is set when such a call finishes, cleared when its output
-- closes, and cleared for a replica's calls when it restarts or is found dead.

ALTER TABLE tool_calls ADD COLUMN output_open BOOLEAN NOT NULL DEFAULT FALSE;

-- The live listing (GET /v1/tool-calls?live=true) asks for calls that are active or
-- whose output is open; the active index grows to hold both, and stays as small as the
-- set of live calls.
DROP INDEX IF EXISTS tool_calls_tenant_active_idx;
CREATE INDEX tool_calls_tenant_active_idx ON tool_calls (tenant, created_at, id)
    WHERE (status IN ('pending', 'running', 'waiting') OR output_open);

-- Restart recovery and the replica sweep clear a replica's marks.
CREATE INDEX tool_calls_owner_output_open_idx ON tool_calls (owner) WHERE output_open;
