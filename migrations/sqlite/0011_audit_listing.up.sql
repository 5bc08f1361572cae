-- GET /v1/audit lists a tenant's audit entries newest first, a page at a time. Without
-- this index a tenant's page read every tenant's entries from audit_log_ts_idx. (The
-- rowid, which is the entry's id, ends every SQLite index: this is (tenant, ts, id).)
CREATE INDEX audit_log_tenant_ts_idx ON audit_log (tenant, ts);
