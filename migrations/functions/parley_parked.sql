-- What follows a park, for a task just moved to `waiting_for_agent` for `p_user`'s agent at turn
-- `p_turn`: the park timer armed for `p_parked_at + p_park_timeout` (none without a timeout:
-- personal vs personal negotiations wait for their overall deadline instead), and the turn's
-- push when the user's agent is one Parley calls (`parley_a2a_turn_parked`).
CREATE OR REPLACE FUNCTION parley_parked(
    p_task uuid, p_user text, p_turn integer, p_generation bigint, p_parked_at timestamptz,
    p_park_timeout interval, p_timer_id text
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_park_timeout IS NOT NULL THEN
        PERFORM parley_jobs.arm_park_timeout(p_task, p_turn, p_generation, p_parked_at + p_park_timeout, p_timer_id);
    END IF;
    PERFORM parley_a2a_turn_parked(p_task, p_user, p_turn);
END
$$;
