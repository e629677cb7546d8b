-- A requester may cancel a delegation that has not ended: the delegation and its live attempt
-- end `canceled` (no fallback follows; the attempt counts neither for nor against its target).
-- The statuses a row may take, and the ended ones that carry `ended_at`, gain it.
ALTER TABLE delegations DROP CONSTRAINT delegations_status_check;
ALTER TABLE delegations ADD CONSTRAINT delegations_status_check
    CHECK (status IN ('request', 'accepted', 'completed', 'rejected', 'timeout', 'error', 'canceled'));
ALTER TABLE delegations DROP CONSTRAINT delegations_ended_check;
ALTER TABLE delegations ADD CONSTRAINT delegations_ended_check
    CHECK ((ended_at IS NOT NULL) = (status IN ('completed', 'rejected', 'timeout', 'error', 'canceled')));

ALTER TABLE delegation_attempts DROP CONSTRAINT delegation_attempts_status_check;
ALTER TABLE delegation_attempts ADD CONSTRAINT delegation_attempts_status_check
    CHECK (status IN ('request', 'accepted', 'completed', 'rejected', 'timeout', 'error', 'canceled'));
ALTER TABLE delegation_attempts DROP CONSTRAINT delegation_attempts_ended_check;
ALTER TABLE delegation_attempts ADD CONSTRAINT delegation_attempts_ended_check
    CHECK ((ended_at IS NOT NULL) = (status IN ('completed', 'rejected', 'timeout', 'error', 'canceled')));
