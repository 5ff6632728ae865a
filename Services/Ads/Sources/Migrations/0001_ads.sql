-- SERVICE 4 (UC-ADS-4.1 to 4.5). Every row is scoped by app_id.

-- The ad networks an app uses, by priority (admin API). `verification` says who confirms a
-- rewarded view: the client's /complete, or the network's server-side callback only.
CREATE TABLE ad_providers (
    app_id uuid NOT NULL,
    name text NOT NULL CHECK (name ~ '^[a-z0-9_]{1,40}$'),
    priority integer NOT NULL DEFAULT 100,
    active boolean NOT NULL DEFAULT true,
    rewarded_unit_id text,
    interstitial_unit_id text,
    banner_unit_id text,
    ad_duration_seconds integer NOT NULL DEFAULT 30 CHECK (ad_duration_seconds BETWEEN 1 AND 600),
    verification text NOT NULL DEFAULT 'client' CHECK (verification IN ('client', 'ssv')),
    test_mode boolean NOT NULL DEFAULT false,
    -- used to estimate revenue when a view carries none (UC-ADS-4.5 5a)
    ecpm_estimate_usd numeric(10,4) NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, name)
);

-- One row per ad the app asked to show (step 8).
CREATE TABLE ad_requests (
    id uuid PRIMARY KEY,
    app_id uuid NOT NULL,
    user_id uuid,
    ad_type text NOT NULL CHECK (ad_type IN ('rewarded', 'interstitial')),
    placement text NOT NULL,
    provider text NOT NULL,
    ad_unit_id text NOT NULL,
    ad_duration_seconds integer NOT NULL,
    verification text NOT NULL,
    personalized boolean NOT NULL,
    created_at timestamptz NOT NULL,
    loaded boolean NOT NULL DEFAULT false,
    shown boolean NOT NULL DEFAULT false,
    load_time_ms integer,
    load_error text,
    load_failures integer NOT NULL DEFAULT 0,
    completed_at timestamptz,
    -- the database's clock at insert: the aggregation job's watermark
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ad_requests_user ON ad_requests (app_id, user_id, created_at DESC);
CREATE INDEX ad_requests_day ON ad_requests (app_id, created_at);

-- One row per view that ended (completed or not), the source of the revenue figures.
CREATE TABLE ad_views (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_id uuid NOT NULL,
    user_id uuid,
    ad_request_id uuid NOT NULL UNIQUE REFERENCES ad_requests (id) ON DELETE CASCADE,
    ad_type text NOT NULL,
    placement text NOT NULL,
    provider text NOT NULL,
    ad_completed boolean NOT NULL,
    ad_clicked boolean NOT NULL DEFAULT false,
    display_duration_ms integer NOT NULL,
    reward_granted boolean NOT NULL DEFAULT false,
    reward_amount integer NOT NULL DEFAULT 0,
    -- why a rewarded view earned nothing (too short, daily limit, waiting for the network)
    reward_refusal text,
    revenue_usd numeric(12,6),
    created_at timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ad_views_app_day ON ad_views (app_id, created_at);
CREATE INDEX ad_views_user ON ad_views (app_id, user_id, created_at DESC);

-- Daily counters and cooldowns, one row per user: `day` is the UTC day the counters belong to,
-- reset in the same UPDATE that finds it stale, so every check-and-change is one statement.
CREATE TABLE user_ad_limits (
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    day date NOT NULL,
    rewarded_views integer NOT NULL DEFAULT 0,
    interstitial_views integer NOT NULL DEFAULT 0,
    last_rewarded_at timestamptz,
    rewarded_cooldown_until timestamptz,
    last_interstitial_at timestamptz,
    PRIMARY KEY (app_id, user_id)
);

-- Consent is append-only (audit log): the current consent is the latest row.
CREATE TABLE user_consent_ads (
    id bigserial PRIMARY KEY,
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    consent_personalized_ads boolean NOT NULL,
    consent_data_sharing boolean NOT NULL,
    age_gate_passed boolean NOT NULL,
    is_under_age boolean NOT NULL,
    att_status text CHECK (att_status IN ('authorized', 'denied', 'restricted', 'not_determined')),
    tcf_string text,
    consent_form_status text CHECK (consent_form_status IN ('obtained', 'required', 'not_required', 'unknown')),
    country text,
    gdpr_applies boolean NOT NULL,
    source text NOT NULL DEFAULT 'app' CHECK (source IN ('app', 'auth')),
    created_at timestamptz NOT NULL
);
CREATE INDEX user_consent_ads_latest ON user_consent_ads (app_id, user_id, id DESC);

-- Credits owed to a user (ad rewards, campaign rewards). Each is delivered to subscription
-- through the outbox row it points to; the reference makes a second grant impossible here and
-- a second credit impossible there.
CREATE TABLE pending_rewards (
    id bigserial PRIMARY KEY,
    app_id uuid NOT NULL,
    user_id uuid,
    amount integer NOT NULL CHECK (amount > 0),
    source text NOT NULL,
    reference_id text NOT NULL,
    outbox_id bigint NOT NULL,
    new_balance integer,
    created_at timestamptz NOT NULL,
    UNIQUE (app_id, source, reference_id)
);
CREATE INDEX pending_rewards_user ON pending_rewards (app_id, user_id);

-- AdMob server-side verification callbacks, once per transaction id.
CREATE TABLE ssv_callbacks (
    transaction_id text PRIMARY KEY,
    app_id uuid NOT NULL,
    ad_request_id uuid NOT NULL,
    key_id bigint NOT NULL,
    reward_amount integer,
    received_at timestamptz NOT NULL
);

-- UC-ADS-4.4 campaigns.
CREATE TABLE freemium_campaigns (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_id uuid NOT NULL,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    campaign_type text NOT NULL CHECK (campaign_type IN ('watch_ads', 'streak_bonus', 'referral')),
    reward_amount integer NOT NULL CHECK (reward_amount BETWEEN 1 AND 1000),
    -- min_ads_watched | streak_days | referrals_count, and an optional placement
    conditions jsonb NOT NULL,
    required integer NOT NULL CHECK (required > 0),
    placement text,
    starts_at timestamptz NOT NULL,
    ends_at timestamptz NOT NULL CHECK (ends_at > starts_at),
    active boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX freemium_campaigns_app ON freemium_campaigns (app_id, active, ends_at);

-- Max one participation per campaign per user (the primary key).
CREATE TABLE campaign_participations (
    campaign_id uuid NOT NULL REFERENCES freemium_campaigns (id) ON DELETE CASCADE,
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    progress integer NOT NULL DEFAULT 0,
    completed boolean NOT NULL DEFAULT false,
    completed_at timestamptz,
    last_checkin_day date,
    reward_claimed boolean NOT NULL DEFAULT false,
    reward_claimed_at timestamptz,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (campaign_id, user_id)
);
CREATE INDEX campaign_participations_user ON campaign_participations (app_id, user_id);

CREATE TABLE referral_codes (
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    code text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (app_id, user_id),
    UNIQUE (app_id, code)
);

-- A user is referred once.
CREATE TABLE referral_redemptions (
    app_id uuid NOT NULL,
    referee_id uuid NOT NULL,
    referrer_id uuid NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (app_id, referee_id)
);

-- UC-ADS-4.5: kept by the aggregation job so reports never scan raw views. No user ids.
CREATE TABLE ad_daily_stats (
    app_id uuid NOT NULL,
    day date NOT NULL,
    ad_type text NOT NULL,
    provider text NOT NULL,
    placement text NOT NULL,
    requests bigint NOT NULL DEFAULT 0,
    impressions bigint NOT NULL DEFAULT 0,
    clicks bigint NOT NULL DEFAULT 0,
    completions bigint NOT NULL DEFAULT 0,
    revenue_usd numeric(14,6) NOT NULL DEFAULT 0,
    impressions_without_revenue bigint NOT NULL DEFAULT 0,
    duration_ms_sum bigint NOT NULL DEFAULT 0,
    refreshed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, day, ad_type, provider, placement)
);

-- What the aggregation job has folded in (one row, database time): it refreshes the days of
-- the rows recorded since.
CREATE TABLE ad_stats_state (
    id integer PRIMARY KEY CHECK (id = 1),
    refreshed_until timestamptz NOT NULL
);
CREATE INDEX ad_requests_recorded ON ad_requests (recorded_at);
CREATE INDEX ad_views_recorded ON ad_views (recorded_at);
