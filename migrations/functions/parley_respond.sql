-- Respond, authentication included, in one statement: the task claimed by `p_agent` under claim
-- generation `p_generation`, still in time and at turn count `p_turn_count`, takes the turns
-- `p_turns` (the agent's, and any system turns played after it), and is then either `working`
-- (the engine goes on: the negotiation ends or a system side speaks) or parked again for
-- `p_park_user`. The claim timer ends; a parked task keeps its pending turn timer when that
-- is due by the park deadline, otherwise the timer becomes the park timer. False, having
-- changed nothing, when the claim is no longer the one named (the caller then reads why).
CREATE OR REPLACE FUNCTION parley_respond(
    p_key_hash bytea, p_task uuid, p_agent uuid, p_generation bigint, p_turn_count integer, p_turns jsonb,
    p_park_user text, p_park_timeout interval, p_timer_id text
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v record;
    turns integer := p_turn_count + jsonb_array_length(p_turns);
BEGIN
    -- One new version of the task row: claimed -> working, or on through working to
    -- waiting_for_agent when the next turn is parked (the task table's Respond, then Park).
    UPDATE tasks SET state = CASE WHEN p_park_user IS NULL THEN 'working' ELSE 'waiting_for_agent' END,
                     turn_count = turns, awaiting_user_id = p_park_user,
                     first_parked_at = CASE WHEN p_park_user IS NULL THEN NULL ELSE now() END,
                     claim_agent_id = NULL, claim_expires_at = NULL, updated_at = now()
     WHERE task_id = p_task AND state = 'claimed' AND claim_agent_id = p_agent AND claim_generation = p_generation
       AND claim_expires_at > now() AND turn_count = p_turn_count
       AND EXISTS (SELECT 1 FROM parley_agent_of_key(p_key_hash, p_agent) k WHERE k.auth = 'ok')
    RETURNING opportunity_id, source_user_id, candidate_user_id, first_parked_at INTO v;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM parley_store_turns(p_task, v.opportunity_id, v.source_user_id, v.candidate_user_id, p_turns);
    IF p_park_user IS NULL OR p_park_timeout IS NULL THEN
        PERFORM parley_jobs.disarm_claim_timeout(p_task);
    END IF;
    IF p_park_user IS NOT NULL THEN
        -- The task's pending turn timer (the claim timer just ended, or one kept from before)
        -- is kept when it is due by the park deadline; otherwise it becomes the park timer.
        IF p_park_timeout IS NOT NULL
           AND coalesce(parley_jobs.turn_timer_at(p_task) > v.first_parked_at + p_park_timeout, true) THEN
            PERFORM parley_jobs.arm_park_timeout(p_task, turns, p_generation, v.first_parked_at + p_park_timeout,
                                                 p_timer_id);
        END IF;
        PERFORM parley_a2a_turn_parked(p_task, p_park_user, turns);
    END IF;
    RETURN true;
END
$$;
