-- make bench, growth run: a year of one app's history, written straight into the tables with
-- generate_series (not through the API). psql variables: app (the bench app's id), users (how
-- many accounts), part (prepare, then auth, subscription and ads side by side, then finish). Per account: a refresh token, a subscription, an ad
-- consent and today's ad limits; ten ledger rows, ten ad requests with their views and two
-- content-access decisions. Nothing in it is due: guests expire within 30 days, running
-- subscriptions end in the future, the ledger, views and access decisions lie inside their
-- retention, so every sweep measured after this finds no work.
\set ON_ERROR_STOP on
-- Ids count up (the way UUIDv7 keys would) so that the load appends to its indexes; the
-- bench's own users keep their random ids.
-- Loaded as the operator would restore a dump: row triggers (change announcements) and
-- foreign-key checks off for this session only; the rows are consistent by construction.
SET session_replication_role = replica;
SET synchronous_commit = off;
SET maintenance_work_mem = '512MB';

SELECT :'part' = 'prepare' AS prepare, :'part' = 'auth' AS auth, :'part' = 'subscription' AS subscription,
       :'part' = 'ads' AS ads, :'part' = 'finish' AS finish \gset

\if :prepare
-- The indexes of the tables loaded (but their primary keys, and unique keys other tables refer
-- to) are dropped and built again afterwards: a sort instead of millions of insertions, the
-- load takes half the time. The parts in between load in parallel sessions.
DROP TABLE IF EXISTS public.growth_indexes;
CREATE TABLE public.growth_indexes AS
SELECT i.indrelid::regclass::text AS tbl, c.conname AS constraint_name, i.indexrelid::regclass::text AS name,
       COALESCE(pg_get_constraintdef(c.oid), pg_get_indexdef(i.indexrelid)) AS def
FROM pg_index i LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid
WHERE i.indrelid IN ('auth.users'::regclass, 'auth.refresh_tokens'::regclass, 'subscription.subscriptions'::regclass,
                     'subscription.credit_ledger'::regclass, 'subscription.access_logs'::regclass, 'ads.user_consent_ads'::regclass,
                     'ads.ad_requests'::regclass, 'ads.ad_views'::regclass)
  AND NOT i.indisprimary
  AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f' AND f.conindid = i.indexrelid);
DO $$ DECLARE r record; BEGIN
  FOR r IN SELECT * FROM public.growth_indexes LOOP
    IF r.constraint_name IS NULL THEN EXECUTE 'DROP INDEX ' || r.name;
    ELSE EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.tbl, r.constraint_name); END IF;
  END LOOP;
END $$;
\endif

\timing on
\if :auth
INSERT INTO auth.users (id, app_id, email, email_verified, password_hash, auth_provider, status, is_guest,
                        guest_device_id, guest_expires_at, last_login, created_at, updated_at)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, :'app', CASE WHEN g % 10 < 3 THEN 'grow-' || g || '@example.com' END, g % 10 < 3,
       CASE WHEN g % 10 < 3 THEN '$2b$12$growthbenchgrowthbenchgrowthbenchgrowthbenchgrowthbe' END,
       CASE WHEN g % 10 < 3 THEN 'email' ELSE 'guest' END, CASE WHEN g % 10 = 9 THEN 'premium' ELSE 'free' END, g % 10 >= 3,
       CASE WHEN g % 10 >= 3 THEN 'grow-device-' || g END, CASE WHEN g % 10 >= 3 THEN now() + (1 + g % 29) * interval '1 day' END,
       now() - (g % 30) * interval '1 day', now() - (g % 365) * interval '1 day', now() - (g % 30) * interval '1 day'
FROM generate_series(1, :users) g;

INSERT INTO auth.refresh_tokens (user_id, app_id, family_id, device_id, token_hash, expires_at, created_at)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, :'app', ('00000000-0000-4000-9000-' || lpad(to_hex(g), 12, '0'))::uuid, 'grow-device-' || g,
       encode(sha256(('grow-token-' || g)::bytea), 'hex'), now() + (1 + g % 29) * interval '1 day', now() - (g % 30) * interval '1 day'
FROM generate_series(1, :users) g;

\endif

\if :subscription
-- Four in ten subscriptions running (ending within the year ahead), the rest ended.
INSERT INTO subscription.subscriptions (app_id, user_id, plan_type, status, start_date, end_date, store, store_product_id,
                                        store_transaction_id, store_original_transaction_id, environment, price, currency,
                                        expired_at, created_at, updated_at)
SELECT :'app', ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, CASE WHEN g % 2 = 0 THEN 'monthly' ELSE 'yearly' END,
       CASE WHEN g % 10 < 4 THEN 'active' WHEN g % 10 < 5 THEN 'cancelled' ELSE 'expired' END,
       now() - (g % 365) * interval '1 day',
       CASE WHEN g % 10 < 4 THEN now() + (1 + g % 360) * interval '1 day' ELSE now() - (1 + g % 300) * interval '1 day' END,
       CASE WHEN g % 3 = 0 THEN 'google' ELSE 'apple' END, 'geo.premium.monthly', 'grow-tx-' || g, 'grow-otx-' || g, 'Production',
       4.99, 'EUR', CASE WHEN g % 10 >= 5 THEN now() - (1 + g % 300) * interval '1 day' END,
       now() - (g % 365) * interval '1 day', now() - (g % 30) * interval '1 day'
FROM generate_series(1, :users) g;

INSERT INTO subscription.credit_balances (app_id, user_id, balance, updated_at)
SELECT :'app', ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 10 * 5, now() - (g % 30) * interval '1 day'
FROM generate_series(1, :users) g;

-- Ten ledger rows per account over the last year (ten ads watched, 5 credits each).
INSERT INTO subscription.credit_ledger (app_id, user_id, amount, source, reference_id, balance_after, created_at)
SELECT :'app', ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 5, 'ad_reward', 'grow-' || g || '-' || k, 5 * k,
       now() - ((g + k * 37) % 365) * interval '1 day'
FROM generate_series(1, :users) g, generate_series(1, 10) k;

INSERT INTO subscription.access_logs (app_id, user_id, content_id, access_granted, user_status, via, device_id, "timestamp")
SELECT :'app', ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'quiz-' || (g + k) % 500, true, 'free', 'free', 'grow-device-' || g,
       now() - ((g + k * 7) % 89) * interval '1 day'
FROM generate_series(1, :users) g, generate_series(1, 2) k;

\endif

\if :ads
INSERT INTO ads.user_consent_ads (app_id, user_id, consent_personalized_ads, consent_data_sharing, age_gate_passed, is_under_age,
                                  country, gdpr_applies, created_at)
SELECT :'app', ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, g % 2 = 0, g % 2 = 0, true, false, 'FR', true, now() - (g % 365) * interval '1 day'
FROM generate_series(1, :users) g;

INSERT INTO ads.user_ad_limits (app_id, user_id, day, rewarded_views, interstitial_views)
SELECT :'app', ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, (now() AT TIME ZONE 'UTC')::date - g % 30, g % 5, g % 3
FROM generate_series(1, :users) g;

-- Ten ad requests per account over the last year, each with its view.
INSERT INTO ads.ad_requests (id, app_id, user_id, ad_type, placement, provider, ad_unit_id, ad_duration_seconds, verification,
                             personalized, created_at, loaded, shown, completed_at, recorded_at)
SELECT ('00000000-0000-4000-a000-' || lpad(to_hex(g * 16 + k), 12, '0'))::uuid, :'app', ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'rewarded', 'earn_credits', 'admob',
       'test/rewarded', 30, 'ssv', g % 2 = 0, t, true, true, t + interval '31 seconds', t + interval '31 seconds'
FROM generate_series(1, :users) g, generate_series(1, 10) k,
     LATERAL (SELECT now() - interval '2 hours' - ((g + k * 37) % 365) * interval '1 day' AS t) d;

INSERT INTO ads.ad_views (id, app_id, user_id, ad_request_id, ad_type, placement, provider, ad_completed, display_duration_ms,
                          reward_granted, reward_amount, revenue_usd, created_at, recorded_at)
SELECT ('00000000-0000-4000-b000-' || lpad(to_hex(g * 16 + k), 12, '0'))::uuid, :'app', ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
       ('00000000-0000-4000-a000-' || lpad(to_hex(g * 16 + k), 12, '0'))::uuid, 'rewarded', 'earn_credits', 'admob', true,
       30500, true, 5, 0.012, t, t + interval '31 seconds'
FROM generate_series(1, :users) g, generate_series(1, 10) k,
     LATERAL (SELECT now() - interval '2 hours' - ((g + k * 37) % 365) * interval '1 day' AS t) d;
\endif

\if :finish
DO $$ DECLARE r record; BEGIN
  FOR r IN SELECT * FROM public.growth_indexes LOOP
    -- A partitioned table's index is defined ON ONLY the parent: built again on every partition.
    IF r.constraint_name IS NULL THEN EXECUTE replace(r.def, ' ON ONLY ', ' ON ');
    ELSE EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', r.tbl, r.constraint_name, r.def); END IF;
  END LOOP;
END $$;
DROP TABLE public.growth_indexes;
RESET session_replication_role;
-- As after a restore: statistics and the visibility map up to date before anything is measured.
VACUUM (ANALYZE) auth.users, auth.refresh_tokens, subscription.subscriptions, subscription.credit_balances,
    subscription.credit_ledger, subscription.access_logs, ads.user_consent_ads, ads.user_ad_limits, ads.ad_requests, ads.ad_views;
\endif
