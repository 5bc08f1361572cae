-- GET /v1/audit lists audit entries newest first, (ts, id) descending, a page at a
-- time from the last entry of the previous page: a range of one of these indexes,
-- for one tenant or for all. audit_log_ts_idx (ts alone) could not bound the id.
CREATE INDEX audit_log_tenant_ts_idx ON audit_log (tenant, ts, id);
CREATE INDEX audit_log_ts_id_idx ON audit_log (ts, id);
DROP INDEX audit_log_ts_idx;
