DROP TABLE a2a_sends;
ALTER TABLE agent_cards DROP COLUMN last_success_at, DROP COLUMN last_call_outcome, DROP COLUMN last_call_at;
ALTER TABLE delegation_attempts DROP COLUMN remote_task_id;
