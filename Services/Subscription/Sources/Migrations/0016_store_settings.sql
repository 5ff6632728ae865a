-- #16 each app's store credentials, managed at run time (admin routes and CLI) instead of the
-- APPLE_IAP_APPS / GOOGLE_PLAY_APPS environment (kept as the local stack's bootstrap). The
-- secret part (Apple's shared secret, Google's service-account key) is sealed with
-- SUBSCRIPTION_DATA_KEY; the trigger tells every replica to reload.
CREATE TABLE store_settings (
    app_id uuid NOT NULL,
    store text NOT NULL CHECK (store IN ('apple', 'google')),
    settings jsonb NOT NULL,
    sealed_secret bytea,
    version bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, store)
);
CREATE TRIGGER store_settings_changes AFTER INSERT OR UPDATE OR DELETE ON store_settings
    FOR EACH ROW EXECUTE FUNCTION announce_tenant_change('store_settings');
-- A store's notification names the app only by its bundle id / package name: one app each.
CREATE UNIQUE INDEX store_settings_apple_bundle ON store_settings ((settings->>'bundle_id')) WHERE store = 'apple';
CREATE UNIQUE INDEX store_settings_google_package ON store_settings ((settings->>'package_name')) WHERE store = 'google';
