-- Privacy exports (seed 6a): built by a job from every service's part, kept here, and
-- downloadable through a signed link valid 7 days.
CREATE TABLE exports (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    app_id uuid NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'ready', 'failed')),
    data jsonb,
    requested_at timestamptz NOT NULL,
    completed_at timestamptz,
    expires_at timestamptz
);
CREATE INDEX exports_user ON exports (user_id, requested_at DESC);
