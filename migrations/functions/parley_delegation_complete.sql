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
#variable_conflict use_column
DECLARE
    d record;
    a record;
BEGIN
    SELECT k.auth, k.agent_id, k.owner_user_id INTO auth, key_agent_id, key_owner_user_id
      FROM parley_agent_of_key(p_key_hash, p_agent) k;
    IF auth <> 'ok' THEN
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT x.delegation_id, x.status, x.retries_used INTO d FROM delegations x
     WHERE x.delegation_id = parley_delegation_addressed(key_agent_id, p_request) FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'not_found';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT y.attempt, y.target_agent_id, y.status, y.deadline INTO a FROM delegation_attempts y
     WHERE y.delegation_id = d.delegation_id AND y.attempt = d.retries_used + 1;
    status := a.status;
    IF a.target_agent_id IS DISTINCT FROM key_agent_id THEN
        outcome := 'not_addressed';
    ELSIF a.status <> 'accepted' OR a.attempt <> p_attempt OR d.delegation_id <> p_delegation THEN
        outcome := 'invalid_state';
    ELSIF a.deadline <= now() THEN
        outcome := 'past_deadline';
    ELSIF NOT parley_delegation_move(d.delegation_id, a.attempt, 'accepted', 'completed', p_output, NULL,
                                     d.status, d.retries_used, 'completed', p_trust_per_requester) THEN
        outcome := 'invalid_state';
    ELSE
        PERFORM parley_jobs.disarm_delegation_timeout(d.delegation_id);
        outcome := 'completed';
        status := 'completed';
        delegation_record := parley_delegation_record(d.delegation_id);
    END IF;
    RETURN NEXT;
END
$$;
