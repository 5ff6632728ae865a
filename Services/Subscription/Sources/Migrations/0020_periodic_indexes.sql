-- #19 the periodic queries read what is due, not the table: the expiry sweep by the end of
-- the running period (the expression it orders and filters by), the access log's retention by age.
CREATE INDEX subscriptions_expiry_due
    ON subscriptions ((CASE WHEN status = 'grace_period' THEN COALESCE(grace_period_end, end_date) ELSE end_date END))
    WHERE status IN ('active', 'trial', 'grace_period');
CREATE INDEX access_logs_age ON access_logs (timestamp);
