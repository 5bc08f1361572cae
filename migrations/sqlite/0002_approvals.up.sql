-- Durable approvals and the audit log.
-- Timestamps and JSON columns follow 0001: TEXT, UTC, microseconds, fixed width.
-- An approval belongs to one tool call (call_id is tool_calls.id); while it is pending
-- the call is 'waiting'. decision is {"kind","rule","reason","actor"}; decided_at is when
-- it was decided or expired.

CREATE TABLE approvals (
    id          TEXT PRIMARY KEY NOT NULL,
    tenant      TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    call_id     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    arguments   TEXT,
    risk        TEXT NOT NULL DEFAULT '',
    reason      TEXT NOT NULL DEFAULT '',
    suggestions TEXT,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    decision    TEXT,
    created_at  TEXT NOT NULL,
    expires_at  TEXT,
    decided_at  TEXT
);

CREATE INDEX approvals_tenant_status_created_idx ON approvals (tenant, status, created_at);
CREATE INDEX approvals_call_id_idx ON approvals (call_id);
-- ExpireApprovals: pending approvals by expiry, across tenants.
CREATE INDEX approvals_pending_expires_idx ON approvals (expires_at) WHERE status = 'pending';

CREATE TABLE audit_log (
    id      INTEGER PRIMARY KEY, -- no AUTOINCREMENT: its sqlite_sequence table outlives a down migration; rows are never deleted, so ids still only grow
    ts      TEXT NOT NULL,
    tenant  TEXT NOT NULL,
    actor   TEXT NOT NULL,
    action  TEXT NOT NULL,
    subject TEXT NOT NULL DEFAULT '',
    detail  TEXT
);

CREATE INDEX audit_log_ts_idx ON audit_log (ts);
