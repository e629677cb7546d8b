-- Moves attempt `p_attempt` of `p_delegation` from `p_from` to `p_to`, with its output or
-- reason. When the move ends the attempt, it counts for (completed) or against its target on
-- today's trust row, and whether an accepted attempt was completed. With `p_delegation_to`, the
-- delegation's status (from `p_delegation_from`) and retries used move with it. False, having
-- changed nothing, when the attempt was not in `p_from`. The caller holds the delegation's lock.
CREATE OR REPLACE FUNCTION parley_delegation_move(
    p_delegation uuid, p_attempt integer, p_from text, p_to text, p_output jsonb, p_reason text,
    p_delegation_from text, p_retries_used integer, p_delegation_to text
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_target uuid;
    v_ends boolean := p_to IN ('completed', 'rejected', 'timeout', 'error');
    v_done boolean := p_to = 'completed';
    v_was_accepted boolean := p_from = 'accepted';
BEGIN
    UPDATE delegation_attempts
       SET status = p_to, output = p_output, reason = p_reason,
           accepted_at = CASE WHEN p_to = 'accepted' THEN now() ELSE accepted_at END,
           ended_at = CASE WHEN v_ends THEN now() END
     WHERE delegation_id = p_delegation AND attempt = p_attempt AND status = p_from
    RETURNING target_agent_id INTO v_target;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_ends THEN
        INSERT INTO agent_trust_days AS t (agent_id, day, attempts_completed, attempts_unfinished,
                                           accepted_completed, accepted_unfinished)
        VALUES (v_target, (now() AT TIME ZONE 'UTC')::date, v_done::int, (NOT v_done)::int,
                (v_done AND v_was_accepted)::int, (NOT v_done AND v_was_accepted)::int)
        ON CONFLICT (agent_id, day) DO UPDATE
           SET attempts_completed = t.attempts_completed + EXCLUDED.attempts_completed,
               attempts_unfinished = t.attempts_unfinished + EXCLUDED.attempts_unfinished,
               accepted_completed = t.accepted_completed + EXCLUDED.accepted_completed,
               accepted_unfinished = t.accepted_unfinished + EXCLUDED.accepted_unfinished,
               updated_at = now();
    END IF;
    IF p_delegation_to IS NOT NULL THEN
        UPDATE delegations
           SET retries_used = p_retries_used, status = p_delegation_to, output = p_output, updated_at = now(),
               ended_at = CASE WHEN p_delegation_to IN ('completed', 'rejected', 'timeout', 'error') THEN now() END
         WHERE delegation_id = p_delegation AND status = p_delegation_from;
    END IF;
    RETURN true;
END
$$;
