-- Parley calling agents registered by their AgentCard.
--
-- An attempt pushed to such an agent keeps the id of the task the agent answered with, so that
-- the steps that follow it (reading it, cancelling it) and a read of the attempt can name it.
-- The agent's card row keeps when Parley last called it and how that call ended, and when a
-- call last succeeded: the status page shows the first two, and liveness reads the third.
ALTER TABLE delegation_attempts
    ADD COLUMN remote_task_id TEXT CHECK (length(remote_task_id) BETWEEN 1 AND 256);
ALTER TABLE agent_cards
    ADD COLUMN last_call_at TIMESTAMPTZ,
    ADD COLUMN last_call_outcome TEXT CHECK (length(last_call_outcome) <= 300),
    ADD COLUMN last_success_at TIMESTAMPTZ;

-- The messages Parley has begun to send to agents, by id (each derived from what it sends: an
-- attempt, a turn and its claim). A send whose id is already here is a repeat after a crash:
-- Parley first asks the agent for the task that message may have started, because no agent
-- drops a repeated message by its id. Rows older than a day are pruned by housekeeping.
CREATE TABLE a2a_sends (
    message_id  UUID PRIMARY KEY,
    agent_id    UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX a2a_sends_agent_idx ON a2a_sends (agent_id);
CREATE INDEX a2a_sends_started_idx ON a2a_sends (started_at);
