-- Whether a trust score is still provisional: until `p_finished` attempts that counted (in the
-- last 90 days) reach 10 and came from at least 3 other owners (`p_owners`), a score says too
-- little, and one owner's agents can never make it more than that. The one definition, read by
-- the stored records and by `GET /api/trust/{agentId}` alike.
CREATE OR REPLACE FUNCTION parley_trust_provisional(p_finished bigint, p_owners bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(p_finished, 0) < 10 OR coalesce(p_owners, 0) < 3
$$;
