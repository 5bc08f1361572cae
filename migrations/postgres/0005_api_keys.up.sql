-- API keys. Only the SHA-256 of a key is kept (keys are 256 random bits, so a plain
-- hash is enough); the key itself is shown once, when it is created.
-- roles is a comma-separated list of agent, approver, admin.

CREATE TABLE api_keys (
    id         text PRIMARY KEY,
    tenant     text NOT NULL,
    name       text NOT NULL,
    roles      text NOT NULL,
    hash       text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant, created_at);
