-- One schema and one login role per service; each role owns its schema and is granted
-- nothing else, so a service cannot read another's tables. Run by the superuser on each
-- database of the stack (psql -v db=...). Idempotent.
--
-- Passwords: psql -v auth_password=... -v subscription_password=... -v offline_password=...
-- -v ads_password=... (the Kubernetes bootstrap Job passes the Secret's *_DATABASE_PASSWORD,
-- the one source of them); each one not given is the local stack's `<service>_svc_local`.
-- A role that exists gets the given password again, so a rotated Secret takes effect here.
\if :{?auth_password}
\else
\set auth_password auth_svc_local
\endif
\if :{?subscription_password}
\else
\set subscription_password subscription_svc_local
\endif
\if :{?offline_password}
\else
\set offline_password offline_svc_local
\endif
\if :{?ads_password}
\else
\set ads_password ads_svc_local
\endif
SELECT 'CREATE DATABASE ' || quote_ident(:'db')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
\connect :db
CREATE EXTENSION IF NOT EXISTS postgis;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
SELECT set_config('bootstrap.auth_password', :'auth_password', false) AS _auth,
       set_config('bootstrap.subscription_password', :'subscription_password', false) AS _subscription,
       set_config('bootstrap.offline_password', :'offline_password', false) AS _offline,
       set_config('bootstrap.ads_password', :'ads_password', false) AS _ads \gset
DO $$
DECLARE s text;
BEGIN
  FOREACH s IN ARRAY ARRAY['auth', 'subscription', 'offline', 'ads'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = s || '_svc') THEN
      EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L', s || '_svc', current_setting('bootstrap.' || s || '_password'));
    ELSE
      EXECUTE format('ALTER ROLE %I PASSWORD %L', s || '_svc', current_setting('bootstrap.' || s || '_password'));
    END IF;
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I AUTHORIZATION %I', s, s || '_svc');
    EXECUTE format('REVOKE ALL ON SCHEMA %I FROM PUBLIC', s);
    -- The services also send these at start-up; a transaction-mode PgBouncer drops start-up
    -- parameters (ignore_startup_parameters), and then the role's own settings apply.
    EXECUTE format('ALTER ROLE %I SET search_path = %I, public', s || '_svc', s);
    EXECUTE format('ALTER ROLE %I SET statement_timeout = %L', s || '_svc', '30s');
    EXECUTE format('ALTER ROLE %I SET idle_in_transaction_session_timeout = %L', s || '_svc', '60s');
  END LOOP;
END $$;
