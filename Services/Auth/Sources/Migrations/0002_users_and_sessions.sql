-- Accounts (seed UC-AUTH-1.1/1.2). Emails are stored lower-cased; an email, a Google id, an
-- Apple id and a guest device are each unique within an application.
CREATE TABLE users (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_id uuid NOT NULL REFERENCES applications (id),
    email text,
    email_verified boolean NOT NULL DEFAULT false,
    password_hash text,
    google_id text,
    apple_id text,
    auth_provider text NOT NULL CHECK (auth_provider IN ('google', 'apple', 'email', 'guest')),
    display_name text,
    status text NOT NULL DEFAULT 'free' CHECK (status IN ('free', 'premium', 'suspended')),
    suspension_reason text,
    is_guest boolean NOT NULL DEFAULT false,
    guest_device_id text,
    guest_expires_at timestamptz,
    login_attempts integer NOT NULL DEFAULT 0,
    locked_until timestamptz,
    last_login timestamptz,
    deletion_scheduled_at timestamptz,
    anonymized_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_app_email ON users (app_id, email) WHERE email IS NOT NULL;
CREATE UNIQUE INDEX users_app_google ON users (app_id, google_id) WHERE google_id IS NOT NULL;
CREATE UNIQUE INDEX users_app_apple ON users (app_id, apple_id) WHERE apple_id IS NOT NULL;
CREATE UNIQUE INDEX users_app_guest_device ON users (app_id, guest_device_id) WHERE is_guest;
CREATE INDEX users_guest_expiry ON users (guest_expires_at) WHERE is_guest;

CREATE TABLE oauth_connections (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    provider text NOT NULL CHECK (provider IN ('google', 'apple')),
    provider_user_id text NOT NULL,
    -- Provider tokens we must keep (Apple's refresh token, to revoke it at deletion), AES-GCM sealed.
    refresh_token_sealed bytea,
    profile_data jsonb NOT NULL DEFAULT '{}',
    connected_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, provider)
);

CREATE TABLE privacy_settings (
    user_id uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    consent_analytics boolean NOT NULL DEFAULT false,
    consent_third_party boolean NOT NULL DEFAULT false,
    consent_geolocation boolean NOT NULL DEFAULT false,
    consent_personalized_ads boolean NOT NULL DEFAULT false,
    consent_notifications boolean NOT NULL DEFAULT false,
    consent_game_center boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Opaque refresh tokens, stored as SHA-256. One active token per (user, device); every use
-- rotates it. A rotated token keeps a sealed copy of its successor for a few seconds so that
-- concurrent refreshes from one app get the same new pair instead of logging the user out.
CREATE TABLE refresh_tokens (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    app_id uuid NOT NULL,
    family_id uuid NOT NULL,
    device_id text NOT NULL,
    token_hash text NOT NULL UNIQUE,
    device_info jsonb NOT NULL DEFAULT '{}',
    expires_at timestamptz NOT NULL,
    revoked boolean NOT NULL DEFAULT false,
    revoked_reason text,
    rotated_at timestamptz,
    successor_sealed bytea,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX refresh_tokens_active_device ON refresh_tokens (user_id, device_id)
    WHERE NOT revoked AND rotated_at IS NULL;
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);

CREATE TABLE audit_logs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid,
    app_id uuid NOT NULL,
    action text NOT NULL,
    ip_address text,
    user_agent text,
    result text NOT NULL,
    details jsonb NOT NULL DEFAULT '{}',
    timestamp timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_logs_user ON audit_logs (user_id, timestamp);
CREATE INDEX audit_logs_app ON audit_logs (app_id, timestamp);

-- Single-use email links: verification (24 h), password reset, deletion cancellation.
CREATE TABLE email_tokens (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    purpose text NOT NULL CHECK (purpose IN ('verify_email', 'password_reset', 'deletion_cancel')),
    token_hash text NOT NULL UNIQUE,
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
