-- UC-ADS-4.4 "install and play": a referral counts for the referrer once the friend has done
-- something real (a rewarded view the server granted), not at redemption. Redemptions made
-- before this rule were counted when made.
ALTER TABLE referral_redemptions ADD COLUMN counted_at timestamptz;
UPDATE referral_redemptions SET counted_at = created_at;
CREATE INDEX referral_redemptions_uncounted ON referral_redemptions (app_id, referee_id) WHERE counted_at IS NULL;

-- Where a view's revenue figure comes from: 'client' (reported by the app, within the
-- provider's bound) or 'client_capped' (the app claimed more; counted at the bound).
ALTER TABLE ad_views ADD COLUMN revenue_source text;
UPDATE ad_views SET revenue_source = 'client' WHERE revenue_usd IS NOT NULL;
