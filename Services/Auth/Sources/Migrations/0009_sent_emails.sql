-- Emails auth sends on another service's behalf (a purchase confirmation): one per reference,
-- however many times the outbox delivers the request.
CREATE TABLE sent_emails (
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    kind text NOT NULL,
    reference text NOT NULL,
    sent_at timestamptz NOT NULL,
    PRIMARY KEY (app_id, kind, reference)
);
CREATE INDEX sent_emails_user ON sent_emails (app_id, user_id);
