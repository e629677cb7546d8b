-- Back to deleting agents with their rows: the agents deleted meanwhile go now, with what
-- refers to them.
DELETE FROM agents WHERE deleted_at IS NOT NULL;
ALTER TABLE agents DROP CONSTRAINT agents_deleted_inactive;
ALTER TABLE agents DROP COLUMN deleted_at;
