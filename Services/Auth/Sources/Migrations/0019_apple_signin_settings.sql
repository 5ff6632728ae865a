-- #16 each app's Sign in with Apple key (for the code exchange and the revocation Apple asks
-- for at account deletion), set at run time instead of APPLE_SIGNIN_APPS (kept as the local
-- bootstrap). The private key is sealed with AUTH_DATA_KEY.
CREATE TABLE apple_signin_settings (
    app_id uuid PRIMARY KEY REFERENCES applications (id) ON DELETE CASCADE,
    team_id text NOT NULL,
    key_id text NOT NULL,
    client_id text NOT NULL,
    sealed_private_key bytea NOT NULL,
    version bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER apple_signin_settings_changes AFTER INSERT OR UPDATE OR DELETE ON apple_signin_settings
    FOR EACH ROW EXECUTE FUNCTION announce_tenant_change('apple_signin');
