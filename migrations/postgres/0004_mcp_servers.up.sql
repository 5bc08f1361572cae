-- MCP servers added at run time (POST to the API), so that they come back after a
-- restart. Servers declared in the configuration file are not stored here.
-- config is json, not jsonb: the bytes the proxy wrote come back unchanged.

CREATE TABLE mcp_servers (
    name       text PRIMARY KEY,
    config     json NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
