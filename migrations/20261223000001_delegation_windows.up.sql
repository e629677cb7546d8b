-- The rate-limit windows read the last 60 s of a requester's delegations and of a target's
-- attempts. The only indexes on those columns were by id, so each count walked every
-- delegation the agent had ever sent (or every attempt it had ever been offered), fetching each
-- row to test its time: a cost that grew with the agent's history, paid on every delegation.
CREATE INDEX delegations_requester_recent_idx ON delegations (requester_agent_id, created_at);
CREATE INDEX delegation_attempts_target_recent_idx ON delegation_attempts (target_agent_id, created_at);
