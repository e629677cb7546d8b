-- Every delegation attempt is also an A2A task, read at `GET /api/tasks/{id}` by the parties to
-- it: its task id is issued once, when the attempt is made, and never changes.
ALTER TABLE delegation_attempts ADD COLUMN task_id UUID NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE delegation_attempts ADD CONSTRAINT delegation_attempts_task_key UNIQUE (task_id);
