-- An index under every foreign key that deletes or nulls rows when what it points at goes.
--
-- Deleting a referenced row makes PostgreSQL find the rows that point at it (to null them or
-- delete them with it); without an index on the referencing column that is a scan of the whole
-- table, once per deleted row. Three such keys had none:
--
-- - `messages.agent_id` (`SET NULL`): the agent that answered a turn. Only turns answered by a
--   personal agent name one, so the index holds those only. It also serves the turns an agent
--   answered (`answered=true` in an agent's negotiation list, `answeredTurns`).
-- - `tasks.claim_agent_id` (`SET NULL`): the agent holding, or that last held, a turn's claim.
--   `tasks_one_claim_per_agent` covers the live claims only.
-- - `tasks.conversation_id` (`CASCADE`): deleting a conversation deletes its rounds.
--
-- Every other such key leads an index already (the test `every_deleting_foreign_key_has_an_index`
-- keeps it so).
CREATE INDEX messages_agent_idx ON messages (agent_id, task_id) WHERE agent_id IS NOT NULL;
CREATE INDEX tasks_claim_agent_idx ON tasks (claim_agent_id) WHERE claim_agent_id IS NOT NULL;
CREATE INDEX tasks_conversation_idx ON tasks (conversation_id);
