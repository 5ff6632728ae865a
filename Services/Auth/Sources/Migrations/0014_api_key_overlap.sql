-- #16 rotation with overlap: after a rotation the previous API key stays valid until its
-- expiry, so installed copies of the app keep working while their users update.
ALTER TABLE applications ADD COLUMN previous_api_key_hash text, ADD COLUMN previous_api_key_expires_at timestamptz;
