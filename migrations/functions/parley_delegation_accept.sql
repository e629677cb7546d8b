-- Accept, authentication included: the attempt of `p_request` addressed to the key's agent
-- moves `request -> accepted` (and the delegation with it), and the delegation's timer moves to
-- the execution deadline unless it is already set for it. `auth` as `parley_agent_of_key` says
-- it; then `outcome`: `accepted`, `not_found` (never addressed to the agent), `not_addressed`
-- (addressed elsewhere now), `invalid_state` (with the attempt's `status`) or `past_deadline`.
-- An accepted attempt's `output_schema` comes back too: the service keeps it for the complete.
CREATE OR REPLACE FUNCTION parley_delegation_accept(p_key_hash bytea, p_agent uuid, p_request uuid, p_timer_id text)
RETURNS TABLE (
    auth text, key_agent_id uuid, key_owner_user_id text, outcome text, status text,
    delegation_id uuid, attempt integer, deadline timestamptz, output_schema jsonb
)
LANGUAGE plpgsql AS $$
DECLARE
    v_delegation_status text;
    v_retries_used integer;
    v_accept_deadline timestamptz;
    v_output_schema jsonb;
BEGIN
    SELECT l.auth, l.key_agent_id, l.key_owner_user_id, l.outcome, l.status, l.delegation_id, l.attempt, l.deadline,
           l.delegation_status, l.retries_used, l.accept_deadline, l.output_schema
      INTO auth, key_agent_id, key_owner_user_id, outcome, status, delegation_id, attempt, deadline,
           v_delegation_status, v_retries_used, v_accept_deadline, v_output_schema
      FROM parley_delegation_live(p_key_hash, p_agent, p_request) l;
    IF outcome IS DISTINCT FROM 'live' THEN
        NULL;  -- a refused key, `not_found` or `not_addressed`: answered as it stands
    ELSIF status <> 'request' THEN
        outcome := 'invalid_state';
    ELSIF least(v_accept_deadline, deadline) <= now() THEN
        outcome := 'past_deadline';
    ELSIF NOT parley_delegation_move(delegation_id, attempt, 'request', 'accepted', NULL, NULL,
                                     v_delegation_status, v_retries_used, 'accepted', NULL) THEN
        outcome := 'invalid_state';
    ELSE
        IF v_accept_deadline < deadline THEN
            PERFORM parley_jobs.arm_delegation_timeout(delegation_id, attempt, deadline, p_timer_id);
        END IF;
        outcome := 'accepted';
        status := 'accepted';
        output_schema := v_output_schema;
    END IF;
    RETURN NEXT;
END
$$;
