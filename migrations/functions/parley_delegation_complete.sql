-- Complete, authentication included, once the service has checked the output against the
-- schema of attempt `p_attempt` of delegation `p_delegation` (read before, or kept by the
-- accept): that attempt, still the live one of the delegation of `p_request` addressed to the
-- key's agent (not another delegation that took the same request id since), `accepted` and
-- within its deadline, moves to
-- `completed`, the delegation ends with its output, and its timer is cancelled. `outcome`:
-- `completed` (with the delegation's final `delegation_record`), or why not, as for accept
-- (`past_deadline` when the deadline has passed). The completion counts for the target as
-- `parley_delegation_move` says, with `p_trust_per_requester`.
CREATE OR REPLACE FUNCTION parley_delegation_complete(
    p_key_hash bytea, p_agent uuid, p_request uuid, p_delegation uuid, p_attempt integer, p_output jsonb,
    p_trust_per_requester integer
) RETURNS TABLE (auth text, key_agent_id uuid, key_owner_user_id text, outcome text, status text, delegation_record jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    v_delegation uuid;
    v_delegation_status text;
    v_retries_used integer;
    v_attempt integer;
    v_deadline timestamptz;
BEGIN
    SELECT l.auth, l.key_agent_id, l.key_owner_user_id, l.outcome, l.status,
           l.delegation_id, l.delegation_status, l.retries_used, l.attempt, l.deadline
      INTO auth, key_agent_id, key_owner_user_id, outcome, status,
           v_delegation, v_delegation_status, v_retries_used, v_attempt, v_deadline
      FROM parley_delegation_live(p_key_hash, p_agent, p_request) l;
    IF outcome IS DISTINCT FROM 'live' THEN
        NULL;  -- a refused key, `not_found` or `not_addressed`: answered as it stands
    ELSIF status <> 'accepted' OR v_attempt <> p_attempt OR v_delegation <> p_delegation THEN
        outcome := 'invalid_state';
    ELSIF v_deadline <= now() THEN
        outcome := 'past_deadline';
    ELSIF NOT parley_delegation_move(v_delegation, v_attempt, 'accepted', 'completed', p_output, NULL,
                                     v_delegation_status, v_retries_used, 'completed', p_trust_per_requester) THEN
        outcome := 'invalid_state';
    ELSE
        PERFORM parley_jobs.disarm_delegation_timeout(v_delegation);
        outcome := 'completed';
        status := 'completed';
        delegation_record := parley_delegation_record(v_delegation);
    END IF;
    RETURN NEXT;
END
$$;
