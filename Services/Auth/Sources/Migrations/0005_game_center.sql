-- UC-AUTH-1.3: one Game Center player per user and one user per player (within an app),
-- with the achievements and best score the app last reported.
CREATE TABLE game_center_connections (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid NOT NULL UNIQUE REFERENCES users (id) ON DELETE CASCADE,
    app_id uuid NOT NULL,
    player_id text NOT NULL,
    alias text,
    achievements text[] NOT NULL DEFAULT '{}',
    leaderboard_score bigint NOT NULL DEFAULT 0,
    linked_at timestamptz NOT NULL,
    last_sync timestamptz NOT NULL,
    UNIQUE (app_id, player_id)
);
