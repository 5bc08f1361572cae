-- API keys. Only the SHA-256 of a key is kept (keys are 256 random bits, so a plain
-- hash is enough); the key itself is shown once, when it is created.
-- roles is a comma-separated list of agent, approver, admin.

CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY NOT NULL,
    tenant     TEXT NOT NULL,
    name       TEXT NOT NULL,
    roles      TEXT NOT NULL,
    hash       TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE INDEX api_keys_tenant ON api_keys (tenant, created_at);
