-- #45: each attempt of a delivery, as the operator asks "why was it late": when it was sent,
-- what the receiver answered, how long it took, the error when it answered nothing. A delivery
-- row keeps only the last answer; its attempts are kept here, and go with it (its event's
-- retention, 30 days).
CREATE TABLE webhook_delivery_attempts (
    id bigserial PRIMARY KEY,
    delivery_id bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt integer NOT NULL,
    sent_at timestamptz NOT NULL,
    answer_code integer,
    latency_ms integer,
    error text,
    outcome text NOT NULL CHECK (outcome IN ('delivered', 'retry', 'failed', 'gone'))
);
CREATE INDEX webhook_delivery_attempts_delivery ON webhook_delivery_attempts (delivery_id, id);
