-- Offers attempt `p_attempt` of `p_delegation` to `p_target`: the row in `request`, and the
-- delegation's timer armed for when the attempt times out from there (the accept deadline, or
-- the execution deadline if sooner). A target that already received its capability's inbound
-- limit of attempts in the last 60 s (rate-limited skips not counted) is skipped instead: the
-- attempt is recorded and at once `rejected` with reason `rate_limited` (not counted against
-- its trust: the target never saw it, nor in its window), no timer is armed, and the result is
-- false. The window is read first without a lock; only a target it leaves room at is locked
-- (to the end of the transaction: offers to one target take their ranks one at a time) and
-- read again. So a transaction holds at most one target's lock unless it lost a race for the
-- last place in a window, and always takes it last.
CREATE OR REPLACE FUNCTION parley_delegation_offer(
    p_delegation uuid, p_attempt integer, p_task uuid, p_target uuid, p_target_anonymous uuid,
    p_requester_anonymous uuid, p_capability uuid, p_output_schema jsonb, p_created_at timestamptz,
    p_accept_deadline timestamptz, p_deadline timestamptz, p_timer_id text
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_limit integer;
    v_seq bigint;
    v_at timestamptz;
    v_full boolean;
BEGIN
    v_limit := coalesce((SELECT inbound_rate_limit FROM capabilities WHERE capability_id = p_capability), 0);
    v_full := parley_delegation_inbound_full(p_target, v_limit);
    IF NOT v_full THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('delegation-inbound:' || p_target, 0));
        v_full := parley_delegation_inbound_full(p_target, v_limit);
    END IF;
    IF NOT v_full THEN
        SELECT a.target_seq, a.created_at INTO v_seq, v_at FROM delegation_attempts a
         WHERE a.target_agent_id = p_target AND a.target_seq IS NOT NULL ORDER BY a.target_seq DESC LIMIT 1;
    END IF;
    INSERT INTO delegation_attempts (delegation_id, attempt, target_agent_id, target_anonymous_id,
                                     requester_anonymous_id, capability_id, output_schema, status, created_at,
                                     accept_deadline, deadline, task_id, target_seq)
    VALUES (p_delegation, p_attempt, p_target, p_target_anonymous, p_requester_anonymous, p_capability,
            p_output_schema, 'request', greatest(p_created_at, v_at), p_accept_deadline, p_deadline, p_task,
            CASE WHEN NOT v_full THEN coalesce(v_seq, 0) + 1 END);
    IF v_full THEN
        UPDATE delegation_attempts SET status = 'rejected', reason = 'rate_limited', ended_at = now()
         WHERE delegation_id = p_delegation AND attempt = p_attempt;
        RETURN false;
    END IF;
    PERFORM parley_jobs.arm_delegation_timeout(p_delegation, p_attempt, least(p_accept_deadline, p_deadline), p_timer_id);
    RETURN true;
END
$$;
