-- Whether an API key works now: not revoked, and not past its expiry. The one statement of the
-- rule: the key verdict (`parley_agent_of_key`), the seat a negotiation gives a user, the count
-- of a user's keys and the `works` of every key the store reads all ask this function.
-- (LANGUAGE sql, STABLE, one expression: PostgreSQL inlines it into each calling statement, so
-- an index on the columns it is handed still serves.)
CREATE OR REPLACE FUNCTION parley_key_works(p_revoked_at timestamptz, p_expires_at timestamptz)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_revoked_at IS NULL AND (p_expires_at IS NULL OR p_expires_at > now())
$$;
