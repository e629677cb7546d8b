DROP INDEX tasks_conversation_idx;
DROP INDEX tasks_claim_agent_idx;
DROP INDEX messages_agent_idx;
