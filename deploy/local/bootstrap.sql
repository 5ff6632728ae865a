-- One schema and one login role per service; each role owns its schema and is granted
-- nothing else, so a service cannot read another's tables. Run by the superuser on each
-- database of the stack (psql -v db=...). Idempotent.
SELECT 'CREATE DATABASE ' || quote_ident(:'db')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
\connect :db
CREATE EXTENSION IF NOT EXISTS postgis;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
DO $$
DECLARE s text;
BEGIN
  FOREACH s IN ARRAY ARRAY['auth', 'subscription', 'offline', 'ads'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = s || '_svc') THEN
      EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L', s || '_svc', s || '_svc_local');
    END IF;
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I AUTHORIZATION %I', s, s || '_svc');
    EXECUTE format('REVOKE ALL ON SCHEMA %I FROM PUBLIC', s);
    EXECUTE format('ALTER ROLE %I SET search_path = %I, public', s || '_svc', s);
  END LOOP;
END $$;
