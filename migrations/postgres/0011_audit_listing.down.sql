CREATE INDEX IF NOT EXISTS audit_log_ts_idx ON audit_log (ts);
DROP INDEX IF EXISTS audit_log_ts_id_idx;
DROP INDEX IF EXISTS audit_log_tenant_ts_idx;
