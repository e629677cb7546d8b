-- Offers attempt `p_attempt` of `p_delegation` to `p_target`: the row in `request`, and the
-- delegation's timer armed for when the attempt times out from there (the accept deadline, or
-- the execution deadline if sooner); a target registered by its AgentCard also gets the job
-- that sends it the attempt (`parley_jobs.arm_a2a_delegation`), since it never polls.
--
-- The target's inbound window: at most `least(its capability's inboundRateLimit,
-- p_inbound_limit)` attempts in the last 60 s (a capability may only lower the service's
-- limit), and of those at most half (at least one) from any one requesting owner, so that one
-- requester cannot lock every other out. An attempt over either is skipped instead: recorded and
-- at once `rejected` with reason `rate_limited` (never counted for or against the target: it
-- never saw it; nor in its window), no timer is armed, and the result is false. The window is
-- read first without a lock; only a target it leaves room at is locked (to the end of the
-- transaction: offers to one target take their ranks one at a time) and read again, with the
-- requester's share. So a transaction holds at most one target's lock unless it lost a race
-- for the last place in a window, and always takes it last. The share is read as the window
-- is, in index lookups whatever the target's traffic: a ranked attempt carries its requesting
-- owner's own rank at the target (`owner_seq`), and since ranks and times only grow together,
-- the owner holds its share exactly when its share-th newest rank is still in the window.
--
-- `short_timeout` records whether the time the attempt really has, from when it is offered to
-- its deadline, is below the capability's `estimatedLatencyMs` as offered: such an attempt
-- counts neither for nor against the target (see `parley_delegation_move`).
CREATE OR REPLACE FUNCTION parley_delegation_offer(
    p_delegation uuid, p_attempt integer, p_task uuid, p_target uuid, p_target_anonymous uuid,
    p_requester_anonymous uuid, p_capability uuid, p_output_schema jsonb, p_created_at timestamptz,
    p_accept_deadline timestamptz, p_deadline timestamptz, p_timer_id text, p_inbound_limit integer
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_limit integer;
    v_short boolean;
    v_estimate bigint;
    v_owner text;
    v_seq bigint;
    v_owner_seq bigint;
    v_share integer;
    v_at timestamptz;
    v_full boolean;
BEGIN
    SELECT CASE WHEN c.capability_id IS NULL THEN 0 ELSE least(c.inbound_rate_limit, p_inbound_limit) END,
           c.estimated_latency_ms, r.owner_user_id
      INTO v_limit, v_estimate, v_owner
      FROM delegations d
      JOIN agents r ON r.agent_id = d.requester_agent_id
      LEFT JOIN capabilities c ON c.capability_id = p_capability
     WHERE d.delegation_id = p_delegation;
    v_full := parley_delegation_inbound_full(p_target, v_limit);
    IF NOT v_full THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('delegation-inbound:' || p_target, 0));
        v_full := parley_delegation_inbound_full(p_target, v_limit);
    END IF;
    IF NOT v_full THEN
        SELECT a.target_seq, a.created_at INTO v_seq, v_at FROM delegation_attempts a
         WHERE a.target_agent_id = p_target AND a.target_seq IS NOT NULL ORDER BY a.target_seq DESC LIMIT 1;
        -- The requester's share: whether its owner's `v_share`-th newest rank here is among
        -- the target's last `v_limit` ranks and still in the window.
        v_share := greatest(1, v_limit / 2);
        SELECT a.owner_seq INTO v_owner_seq FROM delegation_attempts a
         WHERE a.target_agent_id = p_target AND a.requester_owner_id = v_owner AND a.owner_seq IS NOT NULL
         ORDER BY a.owner_seq DESC LIMIT 1;
        IF coalesce(v_owner_seq, 0) >= v_share THEN
            SELECT a.target_seq > coalesce(v_seq, 0) - v_limit AND a.created_at > now() - interval '60 seconds'
              INTO v_full
              FROM delegation_attempts a
             WHERE a.target_agent_id = p_target AND a.requester_owner_id = v_owner
               AND a.owner_seq = v_owner_seq - v_share + 1;
        END IF;
    END IF;
    -- Against the real deadline: the attempt is offered no earlier than the target's newest one.
    v_short := extract(epoch FROM p_deadline - greatest(p_created_at, v_at)) * 1000 < coalesce(v_estimate, 0);
    INSERT INTO delegation_attempts (delegation_id, attempt, target_agent_id, target_anonymous_id,
                                     requester_anonymous_id, capability_id, output_schema, status, created_at,
                                     accept_deadline, deadline, task_id, target_seq, short_timeout,
                                     requester_owner_id, owner_seq)
    VALUES (p_delegation, p_attempt, p_target, p_target_anonymous, p_requester_anonymous, p_capability,
            p_output_schema, 'request', greatest(p_created_at, v_at), p_accept_deadline, p_deadline, p_task,
            CASE WHEN NOT v_full THEN coalesce(v_seq, 0) + 1 END, coalesce(v_short, false),
            CASE WHEN NOT v_full THEN v_owner END, CASE WHEN NOT v_full THEN coalesce(v_owner_seq, 0) + 1 END);
    IF v_full THEN
        UPDATE delegation_attempts SET status = 'rejected', reason = 'rate_limited', ended_at = now(), counted = false
         WHERE delegation_id = p_delegation AND attempt = p_attempt;
        RETURN false;
    END IF;
    PERFORM parley_jobs.arm_delegation_timeout(p_delegation, p_attempt, least(p_accept_deadline, p_deadline), p_timer_id);
    -- A target Parley calls (registered by its AgentCard) is sent the attempt by a job.
    IF EXISTS (SELECT 1 FROM agent_cards WHERE agent_id = p_target) THEN
        PERFORM parley_jobs.arm_a2a_delegation(p_delegation, p_attempt);
    END IF;
    RETURN true;
END
$$;
