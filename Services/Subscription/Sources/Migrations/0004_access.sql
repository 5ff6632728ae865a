-- UC-SUB-2.2: every access decision is logged; devices seen per user for the concurrent limit.
CREATE TABLE access_logs (
    id bigserial PRIMARY KEY,
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    content_id text NOT NULL,
    access_granted boolean NOT NULL,
    user_status text NOT NULL,
    via text,
    device_id text,
    timestamp timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX access_logs_user ON access_logs (app_id, user_id, timestamp DESC);

CREATE TABLE devices (
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    device_id text NOT NULL,
    first_seen timestamptz NOT NULL,
    last_seen timestamptz NOT NULL,
    PRIMARY KEY (app_id, user_id, device_id)
);
