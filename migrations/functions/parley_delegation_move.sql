-- Moves attempt `p_attempt` of `p_delegation` from `p_from` to `p_to`, with its output or
-- reason. With `p_delegation_to`, the delegation's status (from `p_delegation_from`) and
-- retries used move with it. False, having changed nothing, when the attempt was not in
-- `p_from`. The caller holds the delegation's lock.
--
-- When the move ends the attempt, it counts for (completed) or against its target on today's
-- trust row (and, for an attempt it had accepted, whether it was completed in time) only when
-- it is evidence about the target's work for others (`counted` records the verdict):
-- - never an attempt its requester canceled (`canceled`): the end came from the requester's
--   side, so it says nothing about the target;
-- - never between agents of one owner (an owner cannot vouch for itself);
-- - never for or against a deleted target;
-- - neither for nor against the target when the requester gave it less time than the target's
--   own estimate (`short_timeout`): the estimate can only take evidence away, never bias it, so
--   no declared estimate makes failures free while successes count;
-- - at most `p_trust_per_requester` attempts per target, requesting owner and UTC day
--   (`trust_requester_days`): one requester cannot buy or wreck a score by volume.
CREATE OR REPLACE FUNCTION parley_delegation_move(
    p_delegation uuid, p_attempt integer, p_from text, p_to text, p_output jsonb, p_reason text,
    p_delegation_from text, p_retries_used integer, p_delegation_to text, p_trust_per_requester integer
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_target uuid;
    v_counted boolean;
    v_owner text;
    v_ends boolean := p_to IN ('completed', 'rejected', 'timeout', 'error', 'canceled');
    v_done boolean := p_to = 'completed';
    v_was_accepted boolean := p_from = 'accepted';
    v_today date := (now() AT TIME ZONE 'UTC')::date;
BEGIN
    UPDATE delegation_attempts a
       SET status = p_to, output = p_output, reason = p_reason,
           accepted_at = CASE WHEN p_to = 'accepted' THEN now() ELSE a.accepted_at END,
           ended_at = CASE WHEN v_ends THEN now() END,
           counted = CASE WHEN v_ends THEN NOT a.short_timeout AND p_to <> 'canceled' END
     WHERE a.delegation_id = p_delegation AND a.attempt = p_attempt AND a.status = p_from
    RETURNING a.target_agent_id, a.counted INTO v_target, v_counted;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_counted THEN
        SELECT r.owner_user_id, r.owner_user_id <> t.owner_user_id AND t.deleted_at IS NULL INTO v_owner, v_counted
          FROM delegations d
          JOIN agents r ON r.agent_id = d.requester_agent_id
          JOIN agents t ON t.agent_id = v_target
         WHERE d.delegation_id = p_delegation;
    END IF;
    IF v_counted THEN
        INSERT INTO trust_requester_days AS q (target_agent_id, requester_owner_id, day, counted)
        VALUES (v_target, v_owner, v_today, 1)
        ON CONFLICT (target_agent_id, requester_owner_id, day) DO UPDATE
           SET counted = q.counted + 1 WHERE q.counted < p_trust_per_requester;
        v_counted := FOUND;
    END IF;
    IF v_ends AND NOT v_counted THEN
        UPDATE delegation_attempts SET counted = false WHERE delegation_id = p_delegation AND attempt = p_attempt;
    END IF;
    IF v_counted THEN
        INSERT INTO agent_trust_days AS t (agent_id, day, attempts_completed, attempts_unfinished,
                                           accepted_completed, accepted_unfinished)
        VALUES (v_target, v_today, v_done::int, (NOT v_done)::int,
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
               ended_at = CASE WHEN p_delegation_to IN ('completed', 'rejected', 'timeout', 'error', 'canceled')
                               THEN now() END
         WHERE delegation_id = p_delegation AND status = p_delegation_from;
    END IF;
    RETURN true;
END
$$;
