ALTER TABLE agent_trust_days
    DROP COLUMN accepted_unfinished,
    DROP COLUMN accepted_completed,
    DROP COLUMN attempts_unfinished,
    DROP COLUMN attempts_completed;
DROP TABLE delegation_attempts;
DROP TABLE delegations;
