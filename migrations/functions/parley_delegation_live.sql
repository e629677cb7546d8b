-- What accept and complete both begin with, authentication included: the key's agent (`auth`
-- as `parley_agent_of_key` says it) and, with a valid key, the delegation of `p_request`
-- addressed to that agent (`parley_delegation_addressed`), locked, with its live attempt.
-- `outcome`: NULL for a refused key, `not_found` (never addressed to the agent),
-- `not_addressed` (its live attempt is addressed elsewhere now) or `live`; the delegation's
-- and the attempt's columns are set from `not_addressed` on. One row, not a set: the caller
-- reads it in the same statement that calls it.
CREATE OR REPLACE FUNCTION parley_delegation_live(
    p_key_hash bytea, p_agent uuid, p_request uuid,
    OUT auth text, OUT key_agent_id uuid, OUT key_owner_user_id text, OUT outcome text,
    OUT delegation_id uuid, OUT delegation_status text, OUT retries_used integer,
    OUT attempt integer, OUT status text, OUT accept_deadline timestamptz, OUT deadline timestamptz,
    OUT output_schema jsonb
)
LANGUAGE plpgsql AS $$
DECLARE
    v_target uuid;
BEGIN
    SELECT k.auth, k.agent_id, k.owner_user_id INTO auth, key_agent_id, key_owner_user_id
      FROM parley_agent_of_key(p_key_hash, p_agent) k;
    IF auth = 'ok' THEN
        SELECT x.delegation_id, x.status, x.retries_used INTO delegation_id, delegation_status, retries_used
          FROM delegations x
         WHERE x.delegation_id = parley_delegation_addressed(key_agent_id, p_request) FOR UPDATE;
        SELECT y.attempt, y.target_agent_id, y.status, y.accept_deadline, y.deadline, y.output_schema
          INTO attempt, v_target, status, accept_deadline, deadline, output_schema
          FROM delegation_attempts y
         WHERE y.delegation_id = parley_delegation_live.delegation_id
           AND y.attempt = parley_delegation_live.retries_used + 1;
        outcome := CASE WHEN delegation_id IS NULL THEN 'not_found'
                        WHEN v_target IS DISTINCT FROM key_agent_id THEN 'not_addressed'
                        ELSE 'live' END;
    END IF;
END
$$;
