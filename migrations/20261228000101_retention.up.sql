-- What retention and pruning look rows up by: ended delegations by when they ended, trust
-- counters by day, revoked keys by when they were revoked, anonymous ids no longer current by
-- when they expired. Each is a batch's `ORDER BY ... LIMIT` or range, read from an index
-- instead of a scan of the table.
CREATE INDEX delegations_ended_idx ON delegations (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX trust_requester_days_day_idx ON trust_requester_days (day);
CREATE INDEX api_keys_revoked_idx ON api_keys (revoked_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX anonymous_ids_expired_idx ON anonymous_ids (expires_at) WHERE NOT current;
