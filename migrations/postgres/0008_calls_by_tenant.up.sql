-- GET /v1/tool-calls lists a tenant's calls newest first, and the web console polls it
-- every second, most often for the calls still active. Without these two indexes each
-- poll read the whole table. The second is partial: a call recorded already finished
-- (a read-only call is written once, in its final state) never enters it, and an active
-- one leaves it when it finishes, so it stays as small as the set of active calls.

CREATE INDEX tool_calls_tenant_created_idx ON tool_calls (tenant, created_at, id);
CREATE INDEX tool_calls_tenant_active_idx ON tool_calls (tenant, created_at, id)
    WHERE status IN ('pending', 'running', 'waiting');
