-- Every foreign key leads an index (ForeignKeyIndexTests): a queued answer deleted by the
-- erasure or its retention finds its conflicts through this index, not a scan of them all.
CREATE INDEX sync_conflicts_queue_item ON sync_conflicts (queue_item_id);
