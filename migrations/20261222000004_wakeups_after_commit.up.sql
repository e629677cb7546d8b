-- Wake-ups and event announcements leave the state changes' commits.
--
-- A NOTIFY inside a transaction makes its commit take PostgreSQL's database-wide notification
-- lock and hold it through the commit's WAL flush, so notifying commits happen one at a time.
-- Every respond notified twice (its turn events, by the trigger below, and the park), which cost
-- about a sixth of the turn cycles a second. Now the service announces after commit: it wakes its
-- own waiters at once and batches the keys for the other processes into one NOTIFY per
-- millisecond or so, sent from a transaction of its own; events are rows that every process
-- reads back in id order. Waiters and readers also look again on a short period, so a wake-up
-- lost between a commit and its NOTIFY delays them and loses nothing.

DROP TRIGGER events_announce ON events;
DROP FUNCTION parley_announce_events();

CREATE OR REPLACE FUNCTION parley_parked(
    p_task uuid, p_user text, p_turn integer, p_generation bigint, p_parked_at timestamptz,
    p_park_timeout interval, p_timer_id text
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_park_timeout IS NOT NULL THEN
        PERFORM parley_jobs.arm_park_timeout(p_task, p_turn, p_generation, p_parked_at + p_park_timeout, p_timer_id);
    END IF;
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
    END IF;
    RETURN true;
END
$$;
