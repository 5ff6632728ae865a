-- #47 a console member who forgot their password: a single-use link mailed to them, valid one
-- hour, kept by digest only (the mail holds the only copy of the token).
CREATE TABLE operator_password_resets (
    digest text PRIMARY KEY,
    member_id uuid NOT NULL REFERENCES operator_members (id) ON DELETE CASCADE,
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
);
CREATE INDEX operator_password_resets_member ON operator_password_resets (member_id);
-- A removed app takes its links with it (the cascade reads by app).
CREATE INDEX operator_password_resets_app ON operator_password_resets (app_id);
