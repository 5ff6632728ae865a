-- Email one-time codes (seed 004): 6 digits, stored as an HMAC, valid 5 minutes, 3 tries.
CREATE TABLE otps (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_id uuid NOT NULL REFERENCES applications (id),
    email text NOT NULL,
    code_hash text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL,
    consumed_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX otps_lookup ON otps (app_id, email, created_at DESC) WHERE consumed_at IS NULL;

-- Account deletion (seed 6b): requested now, executed at J+30 unless cancelled.
CREATE TABLE deletions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    app_id uuid NOT NULL,
    reason text,
    requested_at timestamptz NOT NULL,
    scheduled_for timestamptz NOT NULL,
    status text NOT NULL DEFAULT 'scheduled' CHECK (status IN ('scheduled', 'cancelled', 'executed')),
    cancelled_at timestamptz,
    executed_at timestamptz
);
CREATE UNIQUE INDEX deletions_one_scheduled ON deletions (user_id) WHERE status = 'scheduled';
