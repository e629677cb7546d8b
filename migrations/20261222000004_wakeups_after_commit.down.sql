CREATE FUNCTION parley_announce_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('parley_events', json_build_object(
                'id', e.event_id, 'kind', e.kind, 'source_user_id', e.source_user_id,
                'candidate_user_id', e.candidate_user_id, 'data', e.data)::text)
       FROM (SELECT * FROM new_events ORDER BY event_id) e;
    RETURN NULL;
END
$$;
CREATE TRIGGER events_announce AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION parley_announce_events();

CREATE OR REPLACE FUNCTION parley_parked(
    p_task uuid, p_user text, p_turn integer, p_generation bigint, p_parked_at timestamptz,
    p_park_timeout interval, p_timer_id text
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_park_timeout IS NOT NULL THEN
        PERFORM parley_jobs.arm_park_timeout(p_task, p_turn, p_generation, p_parked_at + p_park_timeout, p_timer_id);
    END IF;
    PERFORM pg_notify('parley_turns', p_user);
END
$$;

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
        PERFORM pg_notify('parley_turns', p_park_user);
    END IF;
    RETURN true;
END
$$;
