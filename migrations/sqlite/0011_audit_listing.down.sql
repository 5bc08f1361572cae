DROP INDEX IF EXISTS audit_log_tenant_ts_idx;
