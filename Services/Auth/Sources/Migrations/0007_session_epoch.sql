-- Access tokens carry the user's session epoch (claim `sv`): "log out every device",
-- a password reset, a suspension and the deletion raise it, and every service refuses
-- tokens of an older epoch.
ALTER TABLE users ADD COLUMN session_epoch integer NOT NULL DEFAULT 0;
