-- The store's own expiry, in the milliseconds it sends: a replayed transaction compares equal,
-- never "newer" because a timestamp came back rounded (#13: refunds stick).
ALTER TABLE subscriptions ADD COLUMN store_expires_ms bigint;
UPDATE subscriptions SET store_expires_ms = round(extract(epoch FROM end_date) * 1000)::bigint;
-- StoreKit 2 appAccountToken of the transaction, when the app set one.
ALTER TABLE iap_receipts ADD COLUMN app_account_token uuid;
ALTER TABLE iap_receipts ADD COLUMN revoked_at timestamptz;
