-- Indexes for `GET /api/insights`: everything it reads is found by a time range, either over
-- everyone (the platform) or for one user, so each range has an index of its own and no
-- insights query scans a whole table.

-- Negotiations by the time they ended.
CREATE INDEX tasks_completed_idx ON tasks (completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX tasks_source_completed_idx ON tasks (source_user_id, completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX tasks_candidate_completed_idx ON tasks (candidate_user_id, completed_at) WHERE completed_at IS NOT NULL;

-- Human decisions by the time they were made.
CREATE INDEX opportunity_decisions_decided_idx ON opportunity_decisions (decided_at);
CREATE INDEX opportunity_decisions_user_decided_idx ON opportunity_decisions (user_id, decided_at);

-- Expired opportunities by the time they expired (an expired opportunity never changes again,
-- so its `updated_at` is its expiry).
CREATE INDEX opportunities_expired_idx ON opportunities (updated_at) WHERE status = 'expired';
CREATE INDEX opportunities_source_expired_idx ON opportunities (source_user_id, updated_at) WHERE status = 'expired';
CREATE INDEX opportunities_candidate_expired_idx ON opportunities (candidate_user_id, updated_at) WHERE status = 'expired';

-- Claim expiries over every agent by day (one agent's days are found by the primary key).
CREATE INDEX agent_trust_days_day_idx ON agent_trust_days (day);
