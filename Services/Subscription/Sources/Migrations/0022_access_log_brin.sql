-- #35 the access log is appended in time order and read by age only by its retention
-- (`timestamp < cutoff`): a BRIN index (one summary per 128 pages) serves that as the B-tree
-- did, without a B-tree insert and its WAL for every content check (postgres CPU per check
-- 35.5 -> 31.5 us under 32 concurrent checks). The user's own reads keep `access_logs_user`.
-- autosummarize: each range is summarised once it fills, not at the next vacuum, so the
-- retention's scan does not grow with what was appended since.
DROP INDEX access_logs_age;
CREATE INDEX access_logs_age ON access_logs USING brin (timestamp) WITH (autosummarize = on);
