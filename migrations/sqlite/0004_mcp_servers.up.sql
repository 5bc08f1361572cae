-- MCP servers added at run time (POST to the API), so that they come back after a
-- restart. Servers declared in the configuration file are not stored here.
-- config is the server's JSON configuration as the proxy wrote it.

CREATE TABLE mcp_servers (
    name       TEXT PRIMARY KEY NOT NULL,
    config     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
