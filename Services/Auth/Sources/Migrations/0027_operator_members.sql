-- #47 the console's operators as people: each app's team members, their invites and their
-- console sessions. Operator keys stay for automation.

CREATE TABLE operator_members (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    email text NOT NULL,
    password_hash text NOT NULL,
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'support', 'viewer')),
    -- RFC 6238: the shared secret once the member confirmed a code; the last step used, so a
    -- code works once.
    totp_secret bytea,
    totp_last_step bigint,
    failed_attempts integer NOT NULL DEFAULT 0,
    locked_until timestamptz,
    removed_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (app_id, email)
);

-- Single use, 72 h, by digest only: the link in the mail is the only copy of the token.
CREATE TABLE operator_invites (
    digest text PRIMARY KEY,
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    email text NOT NULL,
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'support', 'viewer')),
    invited_by text NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
);
CREATE INDEX operator_invites_app ON operator_invites (app_id, expires_at);

-- A signed-in console: the refresh cookie's digest, rotated on each use. Ending it (logout,
-- removal) refuses its access tokens at every service within OPERATOR_CACHE_SECONDS.
CREATE TABLE operator_sessions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    member_id uuid NOT NULL REFERENCES operator_members (id) ON DELETE CASCADE,
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    refresh_digest text NOT NULL UNIQUE,
    expires_at timestamptz NOT NULL,
    ended_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operator_sessions_member ON operator_sessions (member_id);
CREATE INDEX operator_sessions_app ON operator_sessions (app_id);

-- An owner can require a second factor of every member of the app.
ALTER TABLE applications ADD COLUMN console_requires_totp boolean NOT NULL DEFAULT false;
