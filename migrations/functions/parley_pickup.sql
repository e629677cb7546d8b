-- Pickup, authentication included, in one statement: the agent's live claim again if it holds
-- one (a retried pickup gets the same turn), else the oldest turn parked for its owner, claimed
-- with `FOR UPDATE SKIP LOCKED` (concurrent pickups never take the same turn) under the next
-- claim generation. A task waits on one turn timer (park or claim) that only has to fire no
-- later than the turn's deadline: the pending one is kept when it is due by the claim's expiry
-- (`parley_jobs.turn_timer_at`) and moved otherwise, so turns quicker than the claim window
-- write no timer row. A kept timer fires early, finds the state moved on, and re-arms for the
-- deadline the task has then (`src/delivery/timers.rs`). `p_skip` names negotiations the agent
-- asked to be passed over (`?skip=`: it just gave them back and backs off on them); the agent's
-- own live claim is returned whatever it skips, so a retried pickup never strands a turn.
-- `person_answers` are the questions the claimed turn's side asked its person at this turn that
-- have closed (answered, or unanswered when the window ran out), oldest first: read here, in the
-- pickup's own statement, so that a turn that never asked costs one probe of an index and no
-- second round trip.
CREATE OR REPLACE FUNCTION parley_pickup(
    p_key_hash bytea, p_agent uuid, p_claim_timeout interval, p_park_timeout interval,
    p_timer_id text, p_park_timer_id text, p_skip uuid[] DEFAULT '{}'
) RETURNS TABLE (
    auth text, key_agent_id uuid, key_owner_user_id text, claimed_now boolean,
    task_id uuid, conversation_id uuid, opportunity_id uuid, state text, source_user_id text,
    candidate_user_id text, source_kind text, candidate_kind text, source_context jsonb,
    candidate_context jsonb, seed_assessment jsonb, index_context jsonb, discovery_query text,
    max_turns integer, turn_count integer, awaiting_user_id text, first_parked_at timestamptz,
    claim_agent_id uuid, claim_generation bigint, claim_expires_at timestamptz,
    created_at timestamptz, updated_at timestamptz, completed_at timestamptz,
    opportunity_status text, history jsonb, previous_rounds jsonb, person_answers jsonb
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_auth text;
    v_agent uuid;
    v_owner text;
    v_task uuid;
    v_live boolean;
    v_generation bigint;
    v_expires timestamptz;
    v_lapsed record;
    v_constraint text;
    v_claimed_now boolean;
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

    -- Two rounds settle any race: a round is only repeated when another pickup of this agent
    -- committed a claim meanwhile, which the next round returns. The third is for safety.
    FOR attempt IN 1..3 LOOP
        -- The agent's claim, live or lapsed (at most one: tasks_one_claim_per_agent).
        SELECT t.task_id, t.claim_expires_at > now() INTO v_task, v_live FROM tasks t
         WHERE t.state = 'claimed' AND t.claim_agent_id = v_agent FOR UPDATE;
        IF v_live THEN
            v_claimed_now := false;
            EXIT;
        END IF;
        IF v_task IS NOT NULL THEN
            UPDATE tasks t SET state = 'waiting_for_agent', claim_agent_id = NULL, claim_expires_at = NULL,
                               updated_at = now()
             WHERE t.task_id = v_task
            RETURNING t.turn_count, t.claim_generation, t.first_parked_at,
                      t.source_kind <> t.candidate_kind AS falls_back INTO v_lapsed;
            IF v_lapsed.falls_back THEN
                PERFORM parley_jobs.arm_park_timeout(v_task, v_lapsed.turn_count, v_lapsed.claim_generation,
                    greatest(now(), v_lapsed.first_parked_at + p_park_timeout), p_park_timer_id);
            END IF;
            PERFORM pg_notify('parley_turns', v_owner);
        END IF;

        BEGIN
            v_task := NULL;
            UPDATE tasks t SET state = 'claimed', claim_agent_id = v_agent, claim_generation = t.claim_generation + 1,
                               claim_expires_at = now() + p_claim_timeout, updated_at = now()
             WHERE t.task_id = (SELECT p.task_id FROM tasks p
                                 WHERE p.state = 'waiting_for_agent' AND p.awaiting_user_id = v_owner
                                   AND p.task_id <> ALL (p_skip)
                                 ORDER BY p.first_parked_at, p.task_id LIMIT 1 FOR UPDATE SKIP LOCKED)
               AND t.state = 'waiting_for_agent'
            RETURNING t.task_id, t.claim_generation, t.claim_expires_at INTO v_task, v_generation, v_expires;
            -- The task's pending turn timer is kept when it is due by the claim's expiry.
            IF v_task IS NOT NULL AND coalesce(parley_jobs.turn_timer_at(v_task) > v_expires, true) THEN
                PERFORM parley_jobs.arm_claim_timeout(v_task, v_generation, v_expires, p_timer_id);
            END IF;
            v_claimed_now := true;
            EXIT;
        EXCEPTION WHEN unique_violation THEN
            GET STACKED DIAGNOSTICS v_constraint = CONSTRAINT_NAME;
            IF v_constraint IS DISTINCT FROM 'tasks_one_claim_per_agent' THEN
                RAISE;
            END IF;
        END;
    END LOOP;
    IF v_claimed_now IS NULL THEN
        RAISE EXCEPTION 'pickup by agent %: concurrent claims kept conflicting', v_agent;
    END IF;
    IF v_task IS NULL THEN
        RETURN NEXT;
        RETURN;
    END IF;
    claimed_now := v_claimed_now;

    RETURN QUERY
    SELECT 'ok'::text, v_agent, v_owner, claimed_now,
           t.task_id, t.conversation_id, t.opportunity_id, t.state, t.source_user_id,
           t.candidate_user_id, t.source_kind, t.candidate_kind, t.source_context,
           t.candidate_context, t.seed_assessment, t.index_context, t.discovery_query,
           t.max_turns, t.turn_count, t.awaiting_user_id, t.first_parked_at,
           t.claim_agent_id, t.claim_generation, t.claim_expires_at,
           t.created_at, t.updated_at, t.completed_at,
           o.status, parley_history(t.task_id), t.previous_rounds,
           (SELECT jsonb_agg(jsonb_build_object(
                       'questionId', q.question_id, 'question', q.question, 'options', q.options,
                       'answer', q.answer, 'answeredAt', CASE WHEN q.answer IS NOT NULL THEN q.answered_at END)
                   ORDER BY q.asked_at)
              FROM person_questions q
             WHERE q.task_id = t.task_id AND q.turn_number = t.turn_count
               AND q.side = CASE WHEN t.turn_count % 2 = 0 THEN 'source' ELSE 'candidate' END
               AND q.status IN ('answered', 'unanswered'))
      FROM tasks t JOIN opportunities o ON o.opportunity_id = t.opportunity_id
     WHERE t.task_id = v_task;
END
$$;
