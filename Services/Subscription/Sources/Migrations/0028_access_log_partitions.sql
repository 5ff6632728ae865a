-- #48 the access log partitioned by day (UTC). Every check inserts into the index on
-- (app_id, user_id, timestamp), keyed by random users: in one table the leaf a row needs is
-- anywhere in an index as large as the whole retention (305 MB at 3.4 M rows against 256 MB of
-- shared buffers: check-access fell to 0.49 x on a grown database). A day's partition keeps the
-- index the writes touch to that day's rows, and a day past retention is dropped whole instead
-- of deleted a thousand rows at a time.
--
-- The rows from before stay where they are, as the partition of everything before this
-- migration; from now on each day is a partition of its own (access_log_partitions, run before
-- each retention purge, keeps a week ahead), and a default partition takes a row that no day
-- holds (a clock far ahead), so that an insert never fails for want of a partition.
ALTER TABLE access_logs RENAME TO access_logs_before;
ALTER TABLE access_logs_before DROP CONSTRAINT access_logs_pkey;
ALTER INDEX access_logs_user RENAME TO access_logs_before_user;
ALTER INDEX access_logs_age RENAME TO access_logs_before_age;
-- The parent's triggers replace these (a statement trigger on a partition would not see the rows
-- routed through the parent).
DROP TRIGGER erasure_fence ON access_logs_before;
DROP TRIGGER erasure_fence_user ON access_logs_before;
-- The parent has the old table's columns as they are (types, NOT NULLs, defaults: a partition
-- attached must match them); its key holds the partition's column (PostgreSQL's rule), and ids
-- still come from the one sequence.
CREATE TABLE access_logs (LIKE access_logs_before INCLUDING DEFAULTS, PRIMARY KEY (id, timestamp)) PARTITION BY RANGE (timestamp);
ALTER TABLE access_logs_before ALTER COLUMN id DROP DEFAULT;
ALTER SEQUENCE access_logs_id_seq OWNED BY access_logs.id;
CREATE INDEX access_logs_user ON access_logs (app_id, user_id, timestamp DESC);
CREATE INDEX access_logs_age ON access_logs (timestamp);
CREATE TRIGGER erasure_fence AFTER INSERT ON access_logs REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION refuse_erased_users();
CREATE TRIGGER erasure_fence_user BEFORE UPDATE OF user_id ON access_logs FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TABLE access_logs_default PARTITION OF access_logs DEFAULT;

-- A day's partition is named by its UTC date.
CREATE FUNCTION access_log_day(at timestamptz) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'access_logs_' || to_char(at AT TIME ZONE 'UTC', 'YYYYMMDD')
$$;

-- The rows from before: everything up to now (or up to the last of them, when a clock wrote
-- ahead). Attaching builds the key's index on them; the other two indexes are theirs already.
DO $$
DECLARE
    bound timestamptz := greatest(now(), (SELECT max(timestamp) + interval '1 microsecond' FROM access_logs_before));
BEGIN
    EXECUTE format('ALTER TABLE access_logs ATTACH PARTITION access_logs_before FOR VALUES FROM (MINVALUE) TO (%L)', bound);
    -- The rest of that day, named as the day's partition would be.
    EXECUTE format(
        'CREATE TABLE %I PARTITION OF access_logs FOR VALUES FROM (%L) TO (%L)',
        access_log_day(bound), bound, date_trunc('day', bound, 'UTC') + interval '24 hours'
    );
END
$$;

-- The days from `at`'s to `ahead` days later, each a partition (created when missing), and the
-- partitions whose every row is older than `at - keep` dropped (none when `keep` is null).
-- Returns how many it created and dropped. A day that overlaps a partition that exists (the
-- rows from before) or rows the default partition holds is left to them. Waits at most a
-- second for the table's lock: under load it gives up and the next run does it.
CREATE FUNCTION access_log_partitions(at timestamptz, keep interval, ahead int) RETURNS int
LANGUAGE plpgsql SET lock_timeout = '1s' AS $$
DECLARE
    day timestamptz;
    changed int := 0;
    p record;
    upper_bound timestamptz;
BEGIN
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

SELECT access_log_partitions(now(), NULL, 7);
