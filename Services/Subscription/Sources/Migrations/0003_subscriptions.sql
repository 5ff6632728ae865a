-- UC-SUB-2.1/2.2: subscriptions bought in a store, their history and the store proofs.
CREATE TABLE subscriptions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    plan_id uuid REFERENCES subscription_plans (id),
    plan_type text NOT NULL,
    status text NOT NULL CHECK (status IN ('trial', 'active', 'grace_period', 'cancelled', 'expired', 'revoked')),
    start_date timestamptz NOT NULL,
    end_date timestamptz NOT NULL,
    trial_end_date timestamptz,
    grace_period_end timestamptz,
    auto_renew boolean NOT NULL DEFAULT true,
    store text NOT NULL CHECK (store IN ('apple', 'google')),
    store_product_id text NOT NULL,
    store_transaction_id text NOT NULL,
    store_original_transaction_id text NOT NULL,
    environment text NOT NULL,
    price numeric(10, 2),
    currency text,
    cancel_requested_at timestamptz,
    expired_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (app_id, store, store_original_transaction_id)
);
CREATE INDEX subscriptions_user ON subscriptions (app_id, user_id, created_at DESC);

CREATE TABLE subscription_events (
    id bigserial PRIMARY KEY,
    subscription_id uuid NOT NULL REFERENCES subscriptions (id),
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    event_type text NOT NULL,
    event_data jsonb NOT NULL DEFAULT '{}',
    timestamp timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX subscription_events_subscription ON subscription_events (subscription_id, id);

CREATE TABLE iap_receipts (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    subscription_id uuid NOT NULL REFERENCES subscriptions (id),
    store text NOT NULL,
    transaction_id text NOT NULL,
    original_transaction_id text NOT NULL,
    product_id text NOT NULL,
    purchase_date timestamptz NOT NULL,
    expiration_date timestamptz,
    is_trial boolean NOT NULL DEFAULT false,
    is_active boolean NOT NULL DEFAULT true,
    validated boolean NOT NULL DEFAULT true,
    validation_date timestamptz NOT NULL,
    signed_data text,
    UNIQUE (app_id, store, transaction_id)
);
