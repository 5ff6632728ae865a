-- #31 campaign A/B cohorts, completion analytics and the expiry reminder (UC-ADS-4.4 rules).
-- Each campaign has a salt: a user's variant is a hash of (salt, app, user) into 10,000
-- buckets split by the weights in force when the user is first assigned, then stored here so it
-- never moves when the weights change.
ALTER TABLE freemium_campaigns ADD COLUMN salt text NOT NULL DEFAULT md5(random()::text || clock_timestamp()::text);
ALTER TABLE freemium_campaigns ADD COLUMN has_variants boolean NOT NULL DEFAULT false;

CREATE TABLE campaign_variants (
    campaign_id uuid NOT NULL REFERENCES freemium_campaigns (id) ON DELETE CASCADE,
    key text NOT NULL,
    position integer NOT NULL,
    weight integer NOT NULL CHECK (weight BETWEEN 0 AND 100),
    reward_amount integer NOT NULL CHECK (reward_amount BETWEEN 1 AND 1000),
    required integer NOT NULL CHECK (required > 0),
    conditions jsonb NOT NULL,
    holdout boolean NOT NULL DEFAULT false,
    PRIMARY KEY (campaign_id, key)
);

-- Every user the campaign met: assigned (its variant, or none without variants) and exposed
-- (first shown it: listing or opening it). Completion rate = completed / exposed.
CREATE TABLE campaign_assignments (
    campaign_id uuid NOT NULL REFERENCES freemium_campaigns (id) ON DELETE CASCADE,
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    variant_key text,
    assigned_at timestamptz NOT NULL,
    exposed_at timestamptz,
    PRIMARY KEY (campaign_id, user_id)
);
CREATE INDEX campaign_assignments_user ON campaign_assignments (app_id, user_id);

-- A participation keeps its variant and the goal it must reach.
ALTER TABLE campaign_participations ADD COLUMN variant_key text;
ALTER TABLE campaign_participations ADD COLUMN required integer;

-- One reminder per user and campaign, a day before its end (sent through auth's messenger).
CREATE TABLE campaign_reminders (
    campaign_id uuid NOT NULL REFERENCES freemium_campaigns (id) ON DELETE CASCADE,
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    progress integer NOT NULL,
    required integer NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (campaign_id, user_id)
);
CREATE INDEX campaign_reminders_user ON campaign_reminders (app_id, user_id);
-- The reminder sweep: running campaigns ending within a day.
CREATE INDEX freemium_campaigns_ending ON freemium_campaigns (ends_at) WHERE active;
