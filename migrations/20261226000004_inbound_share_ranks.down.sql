DROP INDEX delegation_attempts_owner_seq_key;
ALTER TABLE delegation_attempts DROP COLUMN owner_seq, DROP COLUMN requester_owner_id;
