-- #19 the hourly upkeep reads what is due, not the tables: copies past their expiry or unopened
-- for 90 days, conflicts a week old, tombstones past the window.
CREATE INDEX offline_categories_expiry ON offline_categories (expires_at);
CREATE INDEX offline_categories_last_open ON offline_categories ((COALESCE(last_accessed_at, downloaded_at)));
CREATE INDEX sync_conflicts_age ON sync_conflicts (created_at) WHERE NOT resolved;
CREATE INDEX content_items_tombstones ON content_items (deleted_at) WHERE deleted_at IS NOT NULL;
