ALTER TABLE delegation_attempts DROP CONSTRAINT delegation_attempts_task_key;
ALTER TABLE delegation_attempts DROP COLUMN task_id;
