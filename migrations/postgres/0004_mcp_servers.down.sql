DROP TABLE IF EXISTS mcp_servers;
