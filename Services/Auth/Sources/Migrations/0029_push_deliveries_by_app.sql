-- #47 the console's recent sends, newest first, one app at a time.
CREATE INDEX push_deliveries_recent ON push_deliveries (app_id, id DESC);
