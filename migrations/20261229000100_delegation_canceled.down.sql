-- Back to the statuses without `canceled`: a canceled delegation or attempt reads as `error`
-- (it ended, and did not complete), its reason kept; no `delegation.status` event is written
-- for the rewrite.
ALTER TABLE delegation_attempts DISABLE TRIGGER delegation_attempts_status_event;
UPDATE delegation_attempts SET status = 'error' WHERE status = 'canceled';
ALTER TABLE delegation_attempts ENABLE TRIGGER delegation_attempts_status_event;
UPDATE delegations SET status = 'error' WHERE status = 'canceled';

ALTER TABLE delegations DROP CONSTRAINT delegations_status_check;
ALTER TABLE delegations ADD CONSTRAINT delegations_status_check
    CHECK (status IN ('request', 'accepted', 'completed', 'rejected', 'timeout', 'error'));
ALTER TABLE delegations DROP CONSTRAINT delegations_ended_check;
ALTER TABLE delegations ADD CONSTRAINT delegations_ended_check
    CHECK ((ended_at IS NOT NULL) = (status IN ('completed', 'rejected', 'timeout', 'error')));

ALTER TABLE delegation_attempts DROP CONSTRAINT delegation_attempts_status_check;
ALTER TABLE delegation_attempts ADD CONSTRAINT delegation_attempts_status_check
    CHECK (status IN ('request', 'accepted', 'completed', 'rejected', 'timeout', 'error'));
ALTER TABLE delegation_attempts DROP CONSTRAINT delegation_attempts_ended_check;
ALTER TABLE delegation_attempts ADD CONSTRAINT delegation_attempts_ended_check
    CHECK ((ended_at IS NOT NULL) = (status IN ('completed', 'rejected', 'timeout', 'error')));
