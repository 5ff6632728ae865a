-- Tenants: every row of every service is scoped by an application id.
CREATE TABLE applications (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL,
    -- SHA-256 of the API key: keys are 256-bit random, so a fast hash is enough and lets
    -- every request be checked without bcrypt's cost.
    api_key_hash text NOT NULL,
    api_key_prefix text NOT NULL,
    google_client_ids text[] NOT NULL DEFAULT '{}',
    apple_bundle_ids text[] NOT NULL DEFAULT '{}',
    -- Other provider settings (Apple team id, key id, services ids...), set by the admin command.
    provider_settings jsonb NOT NULL DEFAULT '{}',
    active boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX applications_name ON applications (name);
