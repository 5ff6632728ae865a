-- Store server notifications, every one stored; a replay (same store id) changes nothing.
CREATE TABLE store_notifications (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_id uuid,
    store text NOT NULL,
    notification_id text NOT NULL,
    notification_type text NOT NULL,
    subtype text,
    original_transaction_id text,
    payload jsonb NOT NULL,
    received_at timestamptz NOT NULL,
    result text NOT NULL,
    UNIQUE (store, notification_id)
);
