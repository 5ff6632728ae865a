-- #48 access_log_partitions, one caller at a time. Each replica that runs workers runs it
-- before its purge; two at once raced: the second's CREATE waited for the first's lock, then
-- failed on the partition the first had made (42P07), and its DROP on the one the first had
-- dropped, and the purge of that run stopped there.
CREATE OR REPLACE FUNCTION access_log_partitions(at timestamptz, keep interval, ahead int) RETURNS int
LANGUAGE plpgsql SET lock_timeout = '1s' AS $$
DECLARE
    day timestamptz;
    changed int := 0;
    p record;
    upper_bound timestamptz;
BEGIN
    -- Every replica that runs workers purges: one at a time here, the others return at once
    -- (their CREATE would wait for the first's and then fail on the table it made, their DROP
    -- on the one it dropped). Class "PART", apart from the fence's "ERAS".
    IF NOT pg_try_advisory_xact_lock(1346458196, 0) THEN
        RETURN 0;
    END IF;
    FOR day IN SELECT generate_series(date_trunc('day', at, 'UTC'), date_trunc('day', at, 'UTC') + ahead * interval '24 hours', interval '24 hours') LOOP
        CONTINUE WHEN to_regclass(access_log_day(day)) IS NOT NULL;
        BEGIN
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF access_logs FOR VALUES FROM (%L) TO (%L)',
                access_log_day(day), day, day + interval '24 hours'
            );
            changed := changed + 1;
        EXCEPTION WHEN invalid_object_definition OR check_violation OR lock_not_available THEN
            NULL;
        END;
    END LOOP;
    IF keep IS NULL THEN
        RETURN changed;
    END IF;
    FOR p IN
        SELECT c.oid::regclass AS part, pg_get_expr(c.relpartbound, c.oid) AS bound
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'access_logs'::regclass
    LOOP
        upper_bound := substring(p.bound FROM $re$ TO \('([^']*)'\)$re$)::timestamptz;
        CONTINUE WHEN upper_bound IS NULL OR upper_bound > at - keep;
        BEGIN
            EXECUTE format('DROP TABLE %s', p.part);
            changed := changed + 1;
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
    END LOOP;
    RETURN changed;
END
$$;
