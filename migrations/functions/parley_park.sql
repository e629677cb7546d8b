-- Parks a locked `working` task for `p_user`'s personal agent at turn `p_turn`, with what
-- follows (`parley_parked`). Returns when the turn was first parked.
CREATE OR REPLACE FUNCTION parley_park(
    p_task uuid, p_user text, p_turn integer, p_park_timeout interval, p_timer_id text
) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    parked_at timestamptz;
    generation bigint;
BEGIN
    UPDATE tasks SET state = 'waiting_for_agent', awaiting_user_id = p_user, first_parked_at = now(),
                     turn_count = p_turn, updated_at = now()
     WHERE task_id = p_task AND state = 'working'
    RETURNING first_parked_at, claim_generation INTO parked_at, generation;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task % is not working', p_task;
    END IF;
    PERFORM parley_parked(p_task, p_user, p_turn, generation, parked_at, p_park_timeout, p_timer_id);
    RETURN parked_at;
END
$$;
