DROP FUNCTION IF EXISTS parley_respond(bytea, uuid, uuid, bigint, integer, jsonb, text, interval, text);
DROP FUNCTION IF EXISTS parley_pickup(bytea, uuid, interval, text);
DROP FUNCTION IF EXISTS parley_history(uuid);
DROP FUNCTION IF EXISTS parley_agent_of_key(bytea, uuid);
DROP FUNCTION IF EXISTS parley_park(uuid, text, integer, interval, text);
DROP FUNCTION IF EXISTS parley_parked(uuid, text, integer, bigint, timestamptz, interval, text);
DROP FUNCTION IF EXISTS parley_store_turns(uuid, uuid, text, text, jsonb);
DROP TRIGGER IF EXISTS events_announce ON events;
DROP FUNCTION IF EXISTS parley_announce_events();
DROP TRIGGER IF EXISTS tasks_count_insert ON tasks;
DROP TRIGGER IF EXISTS tasks_count_update ON tasks;
DROP TRIGGER IF EXISTS tasks_count_delete ON tasks;
DROP FUNCTION IF EXISTS parley_count_active_tasks();
DROP TABLE IF EXISTS task_counts;

-- Claims made under generation fencing have no token hash; the old scheme starts afresh.
ALTER TABLE messages DROP COLUMN claim_generation;
ALTER TABLE messages ADD COLUMN claim_token_hash BYTEA;
CREATE INDEX messages_claim_token_idx ON messages (claim_token_hash) WHERE claim_token_hash IS NOT NULL;
ALTER TABLE tasks DROP CONSTRAINT tasks_claim_complete;
UPDATE tasks SET state = 'waiting_for_agent', claim_agent_id = NULL, claim_expires_at = NULL WHERE state = 'claimed';
ALTER TABLE tasks ADD COLUMN claim_token_hash BYTEA;
ALTER TABLE tasks ADD CONSTRAINT tasks_claim_complete CHECK (
    (state = 'claimed') = (claim_token_hash IS NOT NULL AND claim_expires_at IS NOT NULL));
DROP INDEX IF EXISTS tasks_runnable_idx;
CREATE INDEX tasks_active_idx ON tasks (state) WHERE state IN ('submitted', 'working', 'waiting_for_agent', 'claimed');
