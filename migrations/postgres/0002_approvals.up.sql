-- Durable approvals and the audit log.
-- An approval belongs to one tool call (call_id is tool_calls.id); while it is pending
-- the call is 'waiting'. decision is {"kind","rule","reason","actor"}; decided_at is when
-- it was decided or expired. JSON columns are json, as in 0001.

CREATE TABLE approvals (
    id          text PRIMARY KEY,
    tenant      text NOT NULL,
    session_id  text NOT NULL,
    call_id     text NOT NULL,
    tool        text NOT NULL,
    arguments   json,
    risk        text NOT NULL DEFAULT '',
    reason      text NOT NULL DEFAULT '',
    suggestions json,
    status      text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    decision    json,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz,
    decided_at  timestamptz
);

CREATE INDEX approvals_tenant_status_created_idx ON approvals (tenant, status, created_at);
CREATE INDEX approvals_call_id_idx ON approvals (call_id);
-- ExpireApprovals: pending approvals by expiry, across tenants.
CREATE INDEX approvals_pending_expires_idx ON approvals (expires_at) WHERE status = 'pending';

CREATE TABLE audit_log (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts      timestamptz NOT NULL,
    tenant  text NOT NULL,
    actor   text NOT NULL,
    action  text NOT NULL,
    subject text NOT NULL DEFAULT '',
    detail  json
);

CREATE INDEX audit_log_ts_idx ON audit_log (ts);
