-- #46 live events: each user's own changes, for the app's streams (SSE and WebSocket).

-- The user's event counter: taking its row serialises one user's events, so their numbers
-- follow commit order (a stream never sees 8 before 7 commits). `last_id` keeps the last
-- event's id after the event itself has aged out, so a cursor at the head stays valid.
CREATE TABLE live_counters (
    user_id uuid PRIMARY KEY,
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    last_seq bigint NOT NULL,
    last_id uuid NOT NULL
);
-- An application's deletion cascades here: by this index, not a scan.
CREATE INDEX live_counters_app ON live_counters (app_id);

-- The events, kept LIVE_RETENTION_HOURS (24) for streams that resume. `id` is the owner's
-- event id: an outbox row delivered twice is one event.
CREATE TABLE live_events (
    user_id uuid NOT NULL,
    seq bigint NOT NULL,
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    id uuid NOT NULL,
    type text NOT NULL,
    body jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, seq),
    UNIQUE (user_id, id)
);
CREATE INDEX live_events_age ON live_events (created_at);
CREATE INDEX live_events_app ON live_events (app_id);

-- Single-use tickets for clients that cannot set headers on a WebSocket (a browser): the
-- session they stand for, by its digest only.
CREATE TABLE live_tickets (
    digest text PRIMARY KEY,
    app_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    user_id uuid NOT NULL,
    session_id uuid,
    session_epoch integer,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
);
CREATE INDEX live_tickets_age ON live_tickets (expires_at);
CREATE INDEX live_tickets_app ON live_tickets (app_id);
