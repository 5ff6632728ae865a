-- #30 push notifications: auth is the messenger (it owns the user, the consents, the locale
-- and the per-app settings). Tokens per device, sealed provider credentials per app, each
-- notification asked for (once per the sender's key) and every send with the provider's answer.

-- One token belongs to one user of one app: registering it under another user moves it.
CREATE TABLE push_tokens (
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    device_id text NOT NULL,
    platform text NOT NULL CHECK (platform IN ('ios', 'android')),
    token text NOT NULL,
    environment text NOT NULL CHECK (environment IN ('sandbox', 'production')),
    locale text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, user_id, device_id)
);
CREATE UNIQUE INDEX push_tokens_token ON push_tokens (app_id, token);

-- Each app's APNs key or FCM service account (the secret sealed with AUTH_DATA_KEY, never read
-- back: a fingerprint is shown), and its options (daily cap, templates, silent hints).
CREATE TABLE push_credentials (
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    provider text NOT NULL CHECK (provider IN ('apns', 'fcm')),
    settings jsonb NOT NULL,
    sealed_secret bytea NOT NULL,
    fingerprint text NOT NULL,
    version bigint NOT NULL DEFAULT 1,
    -- The last provider-token refusal (403 InvalidProviderToken...), for the operator.
    last_error text,
    last_error_at timestamptz,
    -- The APNs provider token in force, shared by every replica: Apple accepts one renewal per
    -- 20 minutes, so a replica (or a restart) must not sign its own.
    provider_token text,
    provider_token_issued_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, provider)
);
CREATE TRIGGER push_credentials_changes AFTER INSERT OR UPDATE OR DELETE ON push_credentials
    FOR EACH ROW EXECUTE FUNCTION announce_tenant_change('push_credentials');

CREATE TABLE push_settings (
    app_id uuid PRIMARY KEY REFERENCES applications (id) ON DELETE CASCADE,
    settings jsonb NOT NULL,
    version bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER push_settings_changes AFTER INSERT OR UPDATE OR DELETE ON push_settings
    FOR EACH ROW EXECUTE FUNCTION announce_tenant_change('push_settings');

-- What a service (or an operator) asked to tell one user, or many (a content update): once per
-- (app, key) however many times the outbox delivers the request.
CREATE TABLE notifications (
    id bigserial PRIMARY KEY,
    app_id uuid NOT NULL,
    key text NOT NULL,
    kind text NOT NULL,
    -- One user, or the users of a broadcast (a content update reaching many players).
    user_ids uuid[] NOT NULL,
    data jsonb NOT NULL DEFAULT '{}',
    requested_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (app_id, key)
);
CREATE INDEX notifications_age ON notifications (created_at);

-- Every send, with the provider's answer (kept PUSH_DELIVERY_RETENTION_DAYS; the user's last
-- 30 days are in the export; erasure removes them).
CREATE TABLE push_deliveries (
    id bigserial PRIMARY KEY,
    notification_id bigint NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    app_id uuid NOT NULL,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    device_id text,
    kind text NOT NULL,
    provider text,
    -- sent | removed_token | failed | skipped_consent | skipped_limit | no_device | no_credentials
    outcome text NOT NULL,
    status_code integer,
    reason text,
    collapsed boolean NOT NULL DEFAULT false,
    sent_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE NULLS NOT DISTINCT (notification_id, user_id, device_id)
);
CREATE INDEX push_deliveries_user ON push_deliveries (app_id, user_id, sent_at);
CREATE INDEX push_deliveries_age ON push_deliveries (sent_at);
