-- Per-tenant statistics on content_items.app_id mislead more than they help: a tenant that
-- published after the last ANALYZE is estimated at one row, and the planner then reads a
-- whole catalogue through content_items_changes for each item of a download instead of one
-- primary-key lookup (measured: 0.4 ms per item on 1,000 items, against 0.005 ms). Without
-- statistics the planner's default estimate prefers the primary key for (app_id, id).
ALTER TABLE content_items ALTER COLUMN app_id SET STATISTICS 0;
-- Drops the statistics already gathered (a same-type ALTER TYPE removes them; no rewrite).
ALTER TABLE content_items ALTER COLUMN app_id TYPE uuid;
