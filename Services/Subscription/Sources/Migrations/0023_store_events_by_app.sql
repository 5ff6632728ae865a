-- #47 the console's recent store events, newest first, one app at a time.
CREATE INDEX store_notifications_recent ON store_notifications (app_id, received_at DESC, id DESC);
