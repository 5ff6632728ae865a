-- #14: deleting a category cancels what an unfinished download would still add to it.
ALTER TABLE download_jobs DROP CONSTRAINT download_jobs_status_check;
ALTER TABLE download_jobs ADD CONSTRAINT download_jobs_status_check
    CHECK (status IN ('pending', 'downloading', 'paused', 'completed', 'completed_with_errors', 'failed', 'cancelled'));
ALTER TABLE download_job_items DROP CONSTRAINT download_job_items_status_check;
ALTER TABLE download_job_items ADD CONSTRAINT download_job_items_status_check CHECK (status IN ('pending', 'done', 'failed', 'cancelled'));
