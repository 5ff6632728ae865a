-- UC-ADS-4.5: the two-year purge of detailed requests (and, by cascade, views) finds them by age
-- across all apps; the other indexes lead with app_id.
CREATE INDEX ad_requests_created ON ad_requests (created_at);
