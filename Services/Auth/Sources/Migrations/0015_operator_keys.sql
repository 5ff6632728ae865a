-- #16 operator keys: credentials for one app's admin routes, issued to that app's operators.
-- Only a SHA-256 of the key is kept (256 random bits: nothing to guess); revoking keeps the
-- row, so the audit logs still name whose key acted.
CREATE TABLE operator_keys (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    key_hash text NOT NULL UNIQUE,
    key_prefix text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX operator_keys_app ON operator_keys (app_id, created_at);
