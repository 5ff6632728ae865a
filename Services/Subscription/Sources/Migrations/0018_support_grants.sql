-- #16 premium granted by support (with a reason, for a number of days): a subscription of the
-- store 'support', so access, the expiry sweep, the entitlement facts, the history and the
-- export treat it as any other; never renewed.
ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_store_check,
    ADD CONSTRAINT subscriptions_store_check CHECK (store IN ('apple', 'google', 'support'));
