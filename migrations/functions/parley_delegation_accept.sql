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
    SELECT y.attempt, y.target_agent_id, y.status, y.accept_deadline, y.deadline, y.output_schema INTO a
      FROM delegation_attempts y
     WHERE y.delegation_id = d.delegation_id AND y.attempt = d.retries_used + 1;
    delegation_id := d.delegation_id;
    attempt := a.attempt;
    status := a.status;
    deadline := a.deadline;
    IF a.target_agent_id IS DISTINCT FROM key_agent_id THEN
        outcome := 'not_addressed';
    ELSIF a.status <> 'request' THEN
        outcome := 'invalid_state';
    ELSIF least(a.accept_deadline, a.deadline) <= now() THEN
        outcome := 'past_deadline';
    ELSIF NOT parley_delegation_move(d.delegation_id, a.attempt, 'request', 'accepted', NULL, NULL,
                                     d.status, d.retries_used, 'accepted', NULL) THEN
        outcome := 'invalid_state';
    ELSE
        IF a.accept_deadline < a.deadline THEN
            PERFORM parley_jobs.arm_delegation_timeout(d.delegation_id, a.attempt, a.deadline, p_timer_id);
        END IF;
        outcome := 'accepted';
        status := 'accepted';
        output_schema := a.output_schema;
    END IF;
    RETURN NEXT;
END
$$;
