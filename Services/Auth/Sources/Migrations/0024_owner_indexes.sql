-- Every foreign key leads an index (ForeignKeyIndexTests): deleting the row it points at (an
-- erased or expired user, a purged webhook event) and finding rows by their owner never scan
-- the whole table. refresh_tokens had only a partial index on user_id (active tokens), which
-- neither a sign-in ending the device's previous token, logout-all, the export nor the erasure
-- implies: each was a sequential scan (about 200 ms per sign-in at 1.1 M tokens, make bench's
-- growth run). On a large table this takes a write lock for the index build (about a second
-- per million rows on the bench machine).
CREATE INDEX refresh_tokens_user_device ON refresh_tokens (user_id, device_id);
CREATE INDEX email_tokens_user ON email_tokens (user_id);
CREATE INDEX deletions_user ON deletions (user_id);
CREATE INDEX push_tokens_user ON push_tokens (user_id);
CREATE INDEX push_deliveries_owner ON push_deliveries (user_id);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
