-- Back to one claim per agent by convention only: the pickup without the unique index's race
-- handling, and the plain index it finds an agent's claim by.
DROP FUNCTION IF EXISTS parley_pickup(bytea, uuid, interval, interval, text, text);
CREATE INDEX tasks_claimed_idx ON tasks (claim_agent_id) WHERE state = 'claimed';
DROP INDEX IF EXISTS tasks_one_claim_per_agent;

CREATE FUNCTION parley_pickup(
    p_key_hash bytea, p_agent uuid, p_claim_timeout interval, p_timer_id text
) RETURNS TABLE (
    auth text, key_agent_id uuid, key_owner_user_id text, claimed_now boolean,
    task_id uuid, conversation_id uuid, opportunity_id uuid, state text, source_user_id text,
    candidate_user_id text, source_kind text, candidate_kind text, source_context jsonb,
    candidate_context jsonb, seed_assessment jsonb, index_context jsonb, discovery_query text,
    max_turns integer, turn_count integer, awaiting_user_id text, first_parked_at timestamptz,
    claim_agent_id uuid, claim_generation bigint, claim_expires_at timestamptz,
    created_at timestamptz, updated_at timestamptz, completed_at timestamptz,
    opportunity_status text, history jsonb
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_auth text;
    v_agent uuid;
    v_owner text;
    v_task uuid;
    v_generation bigint;
    v_expires timestamptz;
BEGIN
    SELECT k.auth, k.agent_id, k.owner_user_id INTO v_auth, v_agent, v_owner
      FROM parley_agent_of_key(p_key_hash, p_agent) k;
    auth := v_auth;
    key_agent_id := v_agent;
    key_owner_user_id := v_owner;
    IF v_auth <> 'ok' THEN
        RETURN NEXT;
        RETURN;
    END IF;

    SELECT t.task_id INTO v_task FROM tasks t
     WHERE t.state = 'claimed' AND t.claim_agent_id = v_agent AND t.claim_expires_at > now()
     ORDER BY t.first_parked_at, t.task_id LIMIT 1 FOR UPDATE;
    claimed_now := NOT FOUND;
    IF claimed_now THEN
        UPDATE tasks t SET state = 'claimed', claim_agent_id = v_agent, claim_generation = t.claim_generation + 1,
                           claim_expires_at = now() + p_claim_timeout, updated_at = now()
         WHERE t.task_id = (SELECT p.task_id FROM tasks p
                             WHERE p.state = 'waiting_for_agent' AND p.awaiting_user_id = v_owner
                             ORDER BY p.first_parked_at, p.task_id LIMIT 1 FOR UPDATE SKIP LOCKED)
           AND t.state = 'waiting_for_agent'
        RETURNING t.task_id, t.claim_generation, t.claim_expires_at INTO v_task, v_generation, v_expires;
        IF v_task IS NULL THEN
            RETURN NEXT;
            RETURN;
        END IF;
        PERFORM parley_jobs.arm_claim_timeout(v_task, v_generation, v_expires, p_timer_id);
    END IF;

    RETURN QUERY
    SELECT 'ok'::text, v_agent, v_owner, claimed_now,
           t.task_id, t.conversation_id, t.opportunity_id, t.state, t.source_user_id,
           t.candidate_user_id, t.source_kind, t.candidate_kind, t.source_context,
           t.candidate_context, t.seed_assessment, t.index_context, t.discovery_query,
           t.max_turns, t.turn_count, t.awaiting_user_id, t.first_parked_at,
           t.claim_agent_id, t.claim_generation, t.claim_expires_at,
           t.created_at, t.updated_at, t.completed_at,
           o.status, parley_history(t.task_id)
      FROM tasks t JOIN opportunities o ON o.opportunity_id = t.opportunity_id
     WHERE t.task_id = v_task;
END
$$;
