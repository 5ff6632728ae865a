-- #48: a check whose device was due to be written as seen again waited for that write, then for
-- its decision's: two commits where one does. The sightings now go with the decisions, in one
-- statement and one commit. The rows are locked in key order first, so two batches that renew
-- the same devices wait for each other instead of deadlocking.
CREATE FUNCTION log_access_decisions_and_sightings(
    apps uuid[], users uuid[], contents text[], granted bool[], statuses text[], vias text[], device_ids text[], ats timestamptz[],
    renew bool[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM log_access_decisions(apps, users, contents, granted, statuses, vias, device_ids, ats);
    PERFORM 1 FROM devices d
    JOIN unnest(apps, users, device_ids, renew) AS x(a, u, dv, r) ON x.r AND d.app_id = x.a AND d.user_id = x.u AND d.device_id = x.dv
    ORDER BY d.app_id, d.user_id, d.device_id
    FOR UPDATE OF d;
    UPDATE devices d SET last_seen = GREATEST(d.last_seen, x.t)
    FROM unnest(apps, users, device_ids, ats, renew) AS x(a, u, dv, t, r)
    WHERE x.r AND d.app_id = x.a AND d.user_id = x.u AND d.device_id = x.dv;
END
$$;
