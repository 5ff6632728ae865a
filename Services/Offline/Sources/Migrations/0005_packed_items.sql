-- #14: an item is packed (gzip above 10 KB, SHA-256 of its JSON) once, when published or first
-- downloaded, not once per user per download: a download job copies the packed bytes.
ALTER TABLE content_items ADD COLUMN packed bytea;
ALTER TABLE content_items ADD COLUMN packed_compressed boolean;
ALTER TABLE content_items ADD COLUMN packed_checksum text;
ALTER TABLE content_items ADD COLUMN packed_size integer;
