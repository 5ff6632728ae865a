-- Each item of a download is written once and updated once (pending -> done). With room left
-- on its page the update is HOT: no new primary-key entry for each item (measured: a
-- 1,000-item job 0.055 s -> 0.049 s, against a 0.026 s SELECT of the same rows).
ALTER TABLE download_job_items SET (fillfactor = 60);
