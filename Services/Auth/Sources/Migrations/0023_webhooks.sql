-- #33 webhooks to the app's own servers (Standard Webhooks). Auth hosts the endpoints and
-- delivers, as it does for push: the other services hand it their events through their outbox.

-- An app's endpoints (at most 20): the secret sealed with AUTH_DATA_KEY (shown once at creation
-- and rotation); during a rotation's overlap the previous secret signs too, until it expires.
CREATE TABLE webhook_endpoints (
    id uuid PRIMARY KEY,
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    url text NOT NULL,
    events text[] NOT NULL,
    description text NOT NULL DEFAULT '',
    disabled boolean NOT NULL DEFAULT false,
    disabled_reason text,
    secret_sealed bytea NOT NULL,
    previous_secret_sealed bytea,
    previous_secret_expires_at timestamptz,
    -- The first failed attempt since the last success: five days of failures disable it.
    failing_since timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_app ON webhook_endpoints (app_id, created_at);

-- Each event once, by the id its owner gave it (a redelivered outbox row changes nothing).
CREATE TABLE webhook_events (
    id uuid PRIMARY KEY,
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    type text NOT NULL,
    body jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_events_age ON webhook_events (created_at);

-- One delivery per (endpoint, event): its attempts, the last answer, when it is due again.
-- 'sending' rows are leased (a sender that died leaves them to another after locked_until).
CREATE TABLE webhook_deliveries (
    id bigserial PRIMARY KEY,
    endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id uuid NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sending', 'delivered', 'failed', 'cancelled')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    locked_until timestamptz,
    last_status integer,
    last_error text,
    last_latency_ms integer,
    created_at timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status IN ('pending', 'sending');
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id DESC);
