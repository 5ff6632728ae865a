-- #16 each app's game-server upstreams, set at run time (admin routes and CLI) instead of the
-- one SYNC_UPSTREAMS mapping for every app (kept as the default for apps without a row). The
-- signing secret is not stored: it is derived from SYNC_SIGNING_KEY, the app and secret_version
-- (a rotation bumps it). The trigger tells every replica to reload.
CREATE TABLE sync_upstreams (
    app_id uuid PRIMARY KEY,
    routes jsonb NOT NULL,
    secret_version integer NOT NULL DEFAULT 1 CHECK (secret_version >= 1),
    version bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER sync_upstreams_changes AFTER INSERT OR UPDATE OR DELETE ON sync_upstreams
    FOR EACH ROW EXECUTE FUNCTION announce_tenant_change('sync_upstreams');
