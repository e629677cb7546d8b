DROP INDEX anonymous_ids_expired_idx;
DROP INDEX api_keys_revoked_idx;
DROP INDEX trust_requester_days_day_idx;
DROP INDEX delegations_ended_idx;
