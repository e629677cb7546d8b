ALTER TABLE opportunities DROP COLUMN request_hash;
