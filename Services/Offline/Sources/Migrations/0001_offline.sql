-- SERVICE 3 (UC-OFFLINE-3.1 to 3.6). Every row is scoped by app_id.
CREATE EXTENSION IF NOT EXISTS postgis;

-- The catalogue the main app publishes. Every change takes the next value of one sequence,
-- so "what changed since cursor N" is one indexed range; deletions leave tombstones.
CREATE SEQUENCE content_change_seq;

CREATE TABLE content_categories (
    app_id uuid NOT NULL,
    id text NOT NULL,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    active boolean NOT NULL DEFAULT true,
    change_seq bigint NOT NULL DEFAULT nextval('content_change_seq'),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, id)
);

CREATE TABLE content_items (
    app_id uuid NOT NULL,
    id text NOT NULL,
    category_id text NOT NULL,
    data jsonb NOT NULL,
    size_bytes integer NOT NULL,
    version integer NOT NULL DEFAULT 1,
    created_seq bigint NOT NULL,
    change_seq bigint NOT NULL,
    deleted_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, id),
    FOREIGN KEY (app_id, category_id) REFERENCES content_categories (app_id, id)
);
CREATE INDEX content_items_changes ON content_items (app_id, category_id, change_seq);

-- Tombstones older than the window are purged; a cursor before this point cannot be
-- brought up to date item by item.
CREATE TABLE content_horizon (
    app_id uuid PRIMARY KEY,
    purged_through_seq bigint NOT NULL
);

-- UC-OFFLINE-3.4: content tied to a place, searched by radius on an indexed geography.
CREATE TABLE location_based_content (
    app_id uuid NOT NULL,
    id text NOT NULL,
    content_type text NOT NULL DEFAULT 'quiz',
    title text NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{}',
    location geography(Point, 4326) NOT NULL,
    active boolean NOT NULL DEFAULT true,
    available_until timestamptz,
    PRIMARY KEY (app_id, id)
);
CREATE INDEX location_based_content_geo ON location_based_content USING gist (location);

CREATE TABLE sync_profiles (
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    auto_sync_enabled boolean NOT NULL DEFAULT true,
    sync_on_wifi_only boolean NOT NULL DEFAULT true,
    sync_frequency_hours integer NOT NULL DEFAULT 24 CHECK (sync_frequency_hours BETWEEN 1 AND 168),
    conflict_strategy text NOT NULL DEFAULT 'server_wins' CHECK (conflict_strategy IN ('server_wins', 'local_wins', 'manual')),
    last_sync_at timestamptz,
    last_full_sync_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, user_id)
);

-- UC-OFFLINE-3.1 download jobs and their work list (one row per item, in order), so a
-- paused job resumes where it stopped and no item is written twice.
CREATE TABLE download_jobs (
    id uuid PRIMARY KEY,
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    category_ids text[] NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'downloading', 'paused', 'completed', 'completed_with_errors', 'failed')),
    total_count integer NOT NULL,
    downloaded_count integer NOT NULL DEFAULT 0,
    failed_count integer NOT NULL DEFAULT 0,
    estimated_size_bytes bigint NOT NULL,
    -- the catalogue's change number when the job was created: the copy's update cursor
    cursor bigint NOT NULL,
    created_at timestamptz NOT NULL,
    started_at timestamptz,
    completed_at timestamptz
);
CREATE INDEX download_jobs_user ON download_jobs (app_id, user_id, created_at DESC);

CREATE TABLE download_job_items (
    job_id uuid NOT NULL REFERENCES download_jobs (id) ON DELETE CASCADE,
    position integer NOT NULL,
    category_id text NOT NULL,
    item_id text NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    error text,
    PRIMARY KEY (job_id, position)
);

-- The user's offline copy.
CREATE TABLE offline_categories (
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    category_id text NOT NULL,
    item_count integer NOT NULL DEFAULT 0,
    size_bytes bigint NOT NULL DEFAULT 0,
    cursor bigint NOT NULL DEFAULT 0,
    complete boolean NOT NULL DEFAULT false,
    downloaded_at timestamptz NOT NULL,
    last_updated_at timestamptz NOT NULL,
    last_accessed_at timestamptz,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (app_id, user_id, category_id)
);

CREATE TABLE offline_items (
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    category_id text NOT NULL,
    item_id text NOT NULL,
    data bytea NOT NULL,
    compressed boolean NOT NULL,
    checksum text NOT NULL,
    size_bytes integer NOT NULL,
    version integer NOT NULL,
    downloaded_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (app_id, user_id, item_id)
);
CREATE INDEX offline_items_category ON offline_items (app_id, user_id, category_id, item_id);

-- UC-OFFLINE-3.3 the offline queue: one row per client action, once per client_action_id.
CREATE TABLE sync_queue (
    id uuid PRIMARY KEY,
    app_id uuid NOT NULL,
    user_id uuid,
    client_action_id text NOT NULL,
    action_type text NOT NULL,
    entity_type text NOT NULL,
    entity_id text NOT NULL,
    category_id text,
    payload jsonb NOT NULL,
    priority integer NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'success', 'duplicate', 'failed', 'conflict', 'dropped')),
    attempts integer NOT NULL DEFAULT 0,
    next_retry_at timestamptz NOT NULL DEFAULT now(),
    last_error text,
    created_at timestamptz NOT NULL,
    processed_at timestamptz,
    UNIQUE (app_id, user_id, client_action_id)
);
CREATE INDEX sync_queue_due ON sync_queue (app_id, user_id, priority, created_at) WHERE status = 'pending';

CREATE TABLE sync_jobs (
    id uuid PRIMARY KEY,
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'processing', 'completed')),
    items_to_process integer NOT NULL,
    succeeded integer NOT NULL DEFAULT 0,
    duplicates integer NOT NULL DEFAULT 0,
    failed integer NOT NULL DEFAULT 0,
    conflicts integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    completed_at timestamptz
);

-- With no upstream configured, accepted actions are recorded here (append-only).
CREATE TABLE sync_applied_actions (
    app_id uuid NOT NULL,
    user_id uuid,
    client_action_id text NOT NULL,
    action_type text NOT NULL,
    entity_type text NOT NULL,
    entity_id text NOT NULL,
    payload jsonb NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, client_action_id, user_id)
);

-- UC-OFFLINE-3.5
CREATE TABLE sync_conflicts (
    id uuid PRIMARY KEY,
    app_id uuid NOT NULL,
    user_id uuid,
    queue_item_id uuid NOT NULL REFERENCES sync_queue (id) ON DELETE CASCADE,
    entity_type text NOT NULL,
    entity_id text NOT NULL,
    local_data jsonb NOT NULL,
    server_data jsonb NOT NULL,
    server_version text,
    resolved boolean NOT NULL DEFAULT false,
    resolution text,
    resolved_by text,
    final_data jsonb,
    skip_count integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    resolved_at timestamptz
);
CREATE INDEX sync_conflicts_open ON sync_conflicts (app_id, user_id, created_at) WHERE NOT resolved;

-- UC-OFFLINE-3.4
CREATE TABLE user_locations (
    id uuid PRIMARY KEY,
    app_id uuid NOT NULL,
    user_id uuid,
    location geography(Point, 4326) NOT NULL,
    accuracy double precision NOT NULL,
    altitude double precision,
    source text NOT NULL,
    country_code text,
    country text,
    city text,
    anonymized boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL
);
CREATE INDEX user_locations_user ON user_locations (app_id, user_id, created_at DESC);
CREATE INDEX user_locations_age ON user_locations (created_at) WHERE NOT anonymized;

-- Reverse-geocoding results on coordinates rounded to 0.01° (about 1 km), kept 24 h.
CREATE TABLE geocode_cache (
    lat_key numeric(6,2) NOT NULL,
    lon_key numeric(6,2) NOT NULL,
    country_code text,
    country text,
    city text,
    fetched_at timestamptz NOT NULL,
    PRIMARY KEY (lat_key, lon_key)
);

-- One request per second to the geocoder for the whole deployment: each caller takes the
-- next free slot in one UPDATE.
CREATE TABLE geocoder_slot (
    id integer PRIMARY KEY CHECK (id = 1),
    next_at timestamptz NOT NULL
);
INSERT INTO geocoder_slot VALUES (1, now());

-- Consents as auth last said (PUT /internal/users/{id}/consents).
CREATE TABLE user_consents (
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    geolocation boolean NOT NULL,
    changed_at timestamptz NOT NULL,
    PRIMARY KEY (app_id, user_id)
);
