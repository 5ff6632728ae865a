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

-- The sender's claim reads per endpoint: its slots in use (the rows it is sending) and its first
-- due rows in order, each an index range that stops at what it needs. The claim it replaces ranked
-- every due row of every endpoint by a window function, a sort of the whole backlog per claim:
-- 35 ms at 18,000 due rows, so a backlog slowed the claims that would have drained it (#45:
-- 258 deliveries/s to one endpoint at 500 offered, commit->receipt p99 19 s).
DROP INDEX webhook_deliveries_due;
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt_at, id) WHERE status IN ('pending', 'sending');
CREATE INDEX webhook_deliveries_endpoint_sending ON webhook_deliveries (endpoint_id) WHERE status = 'sending';
