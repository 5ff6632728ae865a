-- #13: a guest account is opened by its device id AND a secret only that device holds (given
-- once at registration, stored as SHA-256). Guests created before this have none: their next
-- sign-in claims one.
ALTER TABLE users ADD COLUMN guest_secret_hash text;
