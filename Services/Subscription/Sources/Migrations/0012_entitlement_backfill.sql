-- Ads and offline now keep each user's entitlement as subscription pushes it (no row there means
-- free). Users with access from before are told once, each with the next version of their own
-- fact counter, through the outbox like every later change.
WITH premium AS (
    SELECT app_id, user_id, max(COALESCE(CASE WHEN status = 'grace_period' THEN grace_period_end END, end_date)) AS valid_until
    FROM subscriptions WHERE status IN ('trial', 'active', 'grace_period')
    GROUP BY app_id, user_id
), counters AS (
    INSERT INTO fact_counters (app_id, user_id, version)
    SELECT app_id, user_id, 1 FROM premium
    ON CONFLICT (app_id, user_id) DO UPDATE SET version = fact_counters.version + 1
    RETURNING app_id, user_id, version
)
INSERT INTO outbox (target_service, method, path, body)
SELECT t.target, 'PUT', '/internal/users/' || p.user_id || '/entitlement?app_id=' || p.app_id,
       jsonb_build_object('app_id', p.app_id, 'user_id', p.user_id, 'is_premium', true, 'version', c.version,
                          'valid_until', to_char(p.valid_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
FROM premium p JOIN counters c USING (app_id, user_id) CROSS JOIN (VALUES ('ads'), ('offline')) AS t (target);
