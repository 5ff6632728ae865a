-- UC-SUB-2.1 plans, per application.
CREATE TABLE subscription_plans (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_id uuid NOT NULL,
    name text NOT NULL,
    plan_type text NOT NULL CHECK (plan_type IN ('weekly', 'monthly', 'annual')),
    apple_product_id text,
    google_product_id text,
    price numeric(10, 2) NOT NULL CHECK (price >= 0),
    currency text NOT NULL,
    trial_enabled boolean NOT NULL DEFAULT false,
    trial_duration_days integer NOT NULL DEFAULT 0,
    features jsonb NOT NULL DEFAULT '{}',
    active boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX subscription_plans_apple ON subscription_plans (app_id, apple_product_id) WHERE apple_product_id IS NOT NULL;
CREATE UNIQUE INDEX subscription_plans_google ON subscription_plans (app_id, google_product_id) WHERE google_product_id IS NOT NULL;
