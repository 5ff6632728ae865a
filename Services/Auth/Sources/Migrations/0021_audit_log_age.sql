-- #19 the audit log's retention (AUDIT_LOG_RETENTION_DAYS) reads the rows past it by this index.
CREATE INDEX audit_logs_age ON audit_logs (timestamp);
