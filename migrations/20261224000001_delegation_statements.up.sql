-- Delegation's calls in few statements, as turn delivery's pickup and respond are.
--
-- Before, a round trip (delegate, the target's inbox, accept, complete, the requester's wait)
-- cost some thirty statements, each a round trip between the service and PostgreSQL: a key
-- lookup per call, then the delegation's lock, its live attempt, the move and the timer, each
-- on its own. Now:
-- - `parley_delegation_accept` is the whole accept, authentication included;
-- - `parley_delegation_complete` is the whole complete after the one read that fetches the
--   output schema (the output is checked in the service, between the two);
-- - `parley_delegation_open` is everything a new delegation reads under its requester's lock
--   (key, request id, outbound window, the named target and its offer, the requester's
--   anonymous id), `parley_delegation_offer` makes one attempt (the target's inbound window,
--   the row, the timer), and `parley_delegation_make` writes the delegation with its first
--   attempt and answers its record;
-- - `parley_delegation_record` is a delegation with its attempts as one JSON value, what
--   `make` and `complete` answer (so the service reads no record after them);
-- - `parley_delegation_move` is the one move of an attempt (the attempt, its trust count when it
--   ends, the delegation's status), called by these and by the service's own statements;
-- - `parley_delegation_addressed` is the one definition of "the delegation of this request id
--   addressed to this agent".
-- - the rate windows are read in two index probes each, not counted row by row (below).
-- The statuses are written as literals; `src/directory/delegation/store.rs` lists the moves
-- they make and a unit test pins them against the transition table in `state.rs`.

-- The rate windows. "More than N in the last 60 s" was a count of the rows in the window, which
-- grows with the agent's rate: an agent allowed 10 000 a minute paid for reading up to 10 000
-- rows on every delegation. Now each counted row carries its rank among its agent's (a
-- requester's delegations: `requester_seq`; a target's attempts, rate-limited skips not
-- counted: `target_seq`), ranks are handed out under the agent's lock with times that never go
-- backwards, so "N or more in the window" is "the N-th newest is in the window": the newest
-- rank, then that one row, two probes of a unique index whatever the rate.
ALTER TABLE delegations ADD COLUMN requester_seq BIGINT;
UPDATE delegations d SET requester_seq = r.n
  FROM (SELECT delegation_id, row_number() OVER (PARTITION BY requester_agent_id ORDER BY created_at, delegation_id) AS n
          FROM delegations) r
 WHERE r.delegation_id = d.delegation_id;
ALTER TABLE delegations ALTER COLUMN requester_seq SET NOT NULL;
CREATE UNIQUE INDEX delegations_requester_seq_key ON delegations (requester_agent_id, requester_seq);
DROP INDEX delegations_requester_recent_idx;

ALTER TABLE delegation_attempts ADD COLUMN target_seq BIGINT;
UPDATE delegation_attempts a SET target_seq = r.n
  FROM (SELECT delegation_id, attempt,
               row_number() OVER (PARTITION BY target_agent_id ORDER BY created_at, delegation_id, attempt) AS n
          FROM delegation_attempts WHERE reason IS DISTINCT FROM 'rate_limited') r
 WHERE r.delegation_id = a.delegation_id AND r.attempt = a.attempt;
CREATE UNIQUE INDEX delegation_attempts_target_seq_key ON delegation_attempts (target_agent_id, target_seq);
DROP INDEX delegation_attempts_target_recent_idx;

-- Room on each page for the new versions of rows updated soon after they are written (a
-- delegation is updated at its accept and its end): such an update stays on its page, and
-- when it changes no indexed column, adds no index entries.
ALTER TABLE delegations SET (fillfactor = 70);
ALTER TABLE delegation_attempts SET (fillfactor = 70);

-- The delegation of `p_request` whose newest attempt addressed to `p_target` is the newest of
-- all (several requesters may use one request id); NULL when none was ever addressed to it.
-- Written to be read from the delegations of the request id (usually one) to their attempts by
-- primary key: a generic plan of the earlier form walked every attempt ever addressed to the
-- target, newest first, looking for one of them.
CREATE FUNCTION parley_delegation_addressed(p_target uuid, p_request uuid) RETURNS uuid
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT d.delegation_id FROM delegations d
             CROSS JOIN LATERAL (SELECT a.created_at, a.attempt FROM delegation_attempts a
                                  WHERE a.delegation_id = d.delegation_id AND a.target_agent_id = p_target
                                  ORDER BY a.attempt DESC LIMIT 1) a
             WHERE d.request_id = p_request
             ORDER BY a.created_at DESC, a.attempt DESC, d.delegation_id DESC LIMIT 1);
END
$$;

-- A delegation and its attempts (first first) as one JSON value, each row as its columns:
-- `{"delegation": {...}, "attempts": [{...}, ...]}`; NULL for an unknown delegation.
CREATE FUNCTION parley_delegation_record(p_delegation uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_build_object('delegation', to_jsonb(d), 'attempts',
                       (SELECT jsonb_agg(to_jsonb(a) ORDER BY a.attempt) FROM delegation_attempts a
                         WHERE a.delegation_id = d.delegation_id))
              FROM delegations d WHERE d.delegation_id = p_delegation);
END
$$;

-- Moves attempt `p_attempt` of `p_delegation` from `p_from` to `p_to`, with its output or
-- reason. When the move ends the attempt, it counts for (completed) or against its target on
-- today's trust row, and whether an accepted attempt was completed. With `p_delegation_to`, the
-- delegation's status (from `p_delegation_from`) and retries used move with it. False, having
-- changed nothing, when the attempt was not in `p_from`. The caller holds the delegation's lock.
CREATE FUNCTION parley_delegation_move(
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

-- Accept, authentication included: the attempt of `p_request` addressed to the key's agent
-- moves `request -> accepted` (and the delegation with it), and the delegation's timer moves to
-- the execution deadline unless it is already set for it. `auth` as `parley_agent_of_key` says
-- it; then `outcome`: `accepted`, `not_found` (never addressed to the agent), `not_addressed`
-- (addressed elsewhere now), `invalid_state` (with the attempt's `status`) or `past_deadline`.
-- An accepted attempt's `output_schema` comes back too: the service keeps it for the complete.
CREATE FUNCTION parley_delegation_accept(p_key_hash bytea, p_agent uuid, p_request uuid, p_timer_id text)
RETURNS TABLE (
    auth text, key_agent_id uuid, key_owner_user_id text, outcome text, status text,
    delegation_id uuid, attempt integer, deadline timestamptz, output_schema jsonb
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    d record;
    a record;
BEGIN
    SELECT k.auth, k.agent_id, k.owner_user_id INTO auth, key_agent_id, key_owner_user_id
      FROM parley_agent_of_key(p_key_hash, p_agent) k;
    IF auth <> 'ok' THEN
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT x.delegation_id, x.status, x.retries_used INTO d FROM delegations x
     WHERE x.delegation_id = parley_delegation_addressed(key_agent_id, p_request) FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'not_found';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT y.attempt, y.target_agent_id, y.status, y.accept_deadline, y.deadline, y.output_schema INTO a
      FROM delegation_attempts y
     WHERE y.delegation_id = d.delegation_id AND y.attempt = d.retries_used + 1;
    delegation_id := d.delegation_id;
    attempt := a.attempt;
    status := a.status;
    deadline := a.deadline;
    IF a.target_agent_id IS DISTINCT FROM key_agent_id THEN
        outcome := 'not_addressed';
    ELSIF a.status <> 'request' THEN
        outcome := 'invalid_state';
    ELSIF least(a.accept_deadline, a.deadline) <= now() THEN
        outcome := 'past_deadline';
    ELSIF NOT parley_delegation_move(d.delegation_id, a.attempt, 'request', 'accepted', NULL, NULL,
                                     d.status, d.retries_used, 'accepted') THEN
        outcome := 'invalid_state';
    ELSE
        IF a.accept_deadline < a.deadline THEN
            PERFORM parley_jobs.arm_delegation_timeout(d.delegation_id, a.attempt, a.deadline, p_timer_id);
        END IF;
        outcome := 'accepted';
        status := 'accepted';
        output_schema := a.output_schema;
    END IF;
    RETURN NEXT;
END
$$;

-- Complete, authentication included, once the service has checked the output against the
-- schema of attempt `p_attempt` of delegation `p_delegation` (read before, or kept by the
-- accept): that attempt, still the live one of the delegation of `p_request` addressed to the
-- key's agent (not another delegation that took the same request id since), `accepted` and
-- within its deadline, moves to
-- `completed`, the delegation ends with its output, and its timer is cancelled. `outcome`:
-- `completed` (with the delegation's final `delegation_record`), or why not, as for accept
-- (`past_deadline` when the deadline has passed).
CREATE FUNCTION parley_delegation_complete(
    p_key_hash bytea, p_agent uuid, p_request uuid, p_delegation uuid, p_attempt integer, p_output jsonb
) RETURNS TABLE (auth text, key_agent_id uuid, key_owner_user_id text, outcome text, status text, delegation_record jsonb)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    d record;
    a record;
BEGIN
    SELECT k.auth, k.agent_id, k.owner_user_id INTO auth, key_agent_id, key_owner_user_id
      FROM parley_agent_of_key(p_key_hash, p_agent) k;
    IF auth <> 'ok' THEN
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT x.delegation_id, x.status, x.retries_used INTO d FROM delegations x
     WHERE x.delegation_id = parley_delegation_addressed(key_agent_id, p_request) FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'not_found';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT y.attempt, y.target_agent_id, y.status, y.deadline INTO a FROM delegation_attempts y
     WHERE y.delegation_id = d.delegation_id AND y.attempt = d.retries_used + 1;
    status := a.status;
    IF a.target_agent_id IS DISTINCT FROM key_agent_id THEN
        outcome := 'not_addressed';
    ELSIF a.status <> 'accepted' OR a.attempt <> p_attempt OR d.delegation_id <> p_delegation THEN
        outcome := 'invalid_state';
    ELSIF a.deadline <= now() THEN
        outcome := 'past_deadline';
    ELSIF NOT parley_delegation_move(d.delegation_id, a.attempt, 'accepted', 'completed', p_output, NULL,
                                     d.status, d.retries_used, 'completed') THEN
        outcome := 'invalid_state';
    ELSE
        PERFORM parley_jobs.disarm_delegation_timeout(d.delegation_id);
        outcome := 'completed';
        status := 'completed';
        delegation_record := parley_delegation_record(d.delegation_id);
    END IF;
    RETURN NEXT;
END
$$;

-- What a new delegation reads first, under its requester's lock (held to the end of the
-- transaction, so that one requester's delegations count each other exactly and a second
-- request with the same id sees the first), authentication included. `auth` as
-- `parley_agent_of_key` says it for any agent of the key; `own` is false when the key's agent is
-- not `p_agent` (the body's `agentId`, checked after the key itself). Then: the delegation this
-- request id already made (`existing`); the outbound window (the smallest outbound limit over the
-- requester's capabilities, else `p_default_limit`; whether that many were sent in the last
-- 60 s, and then when the oldest of them leaves the window); the rank and the earliest time
-- (`next_seq`, `not_before`) the new delegation takes; the named target `p_target` resolved (`target_agent_id`,
-- and whether that anonymous id is `target_live`) with what it offers for the kind of work (as
-- `store::target_offer` reads it); and the requester's current anonymous id, when it has one
-- that has not expired.
CREATE FUNCTION parley_delegation_open(
    p_key_hash bytea, p_agent uuid, p_request uuid, p_target uuid, p_task_type text, p_custom_type text,
    p_default_limit integer
) RETURNS TABLE (
    auth text, key_agent_id uuid, key_owner_user_id text, own boolean, existing uuid,
    outbound_limit integer, window_full boolean, frees_at timestamptz, next_seq bigint, not_before timestamptz,
    target_agent_id uuid, target_live boolean, target_active boolean, capability_id uuid,
    input_schema jsonb, output_schema jsonb, enabled boolean, accept_delegations boolean,
    requester_anonymous_id uuid
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_seq bigint;
BEGIN
    SELECT k.auth, k.agent_id, k.owner_user_id INTO auth, key_agent_id, key_owner_user_id
      FROM parley_agent_of_key(p_key_hash, NULL) k;
    own := key_agent_id = p_agent;
    IF auth <> 'ok' OR NOT own THEN
        RETURN NEXT;
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('delegation-outbound:' || key_agent_id, 0));
    SELECT x.delegation_id INTO existing FROM delegations x
     WHERE x.requester_agent_id = key_agent_id AND x.request_id = p_request;
    IF existing IS NOT NULL THEN
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT coalesce(min(c.outbound_rate_limit), p_default_limit) INTO outbound_limit
      FROM capabilities c WHERE c.agent_id = key_agent_id;
    -- The requester's newest delegation, then its `outbound_limit`-th newest: the window is full
    -- while that one is in it, and frees up when it leaves.
    SELECT x.requester_seq, x.created_at INTO v_seq, not_before FROM delegations x
     WHERE x.requester_agent_id = key_agent_id ORDER BY x.requester_seq DESC LIMIT 1;
    next_seq := coalesce(v_seq, 0) + 1;
    IF outbound_limit <= 0 THEN
        window_full := true;
    ELSIF coalesce(v_seq, 0) < outbound_limit THEN
        window_full := false;
    ELSE
        SELECT x.created_at + interval '60 seconds' INTO frees_at FROM delegations x
         WHERE x.requester_agent_id = key_agent_id AND x.requester_seq = v_seq - outbound_limit + 1;
        window_full := frees_at > now();
    END IF;
    IF p_target IS NOT NULL THEN
        SELECT i.agent_id, i.current AND i.expires_at > now() INTO target_agent_id, target_live
          FROM anonymous_ids i WHERE i.anonymous_id = p_target;
        SELECT a.status = 'active', c.capability_id, c.input_schema, c.output_schema,
               coalesce(c.enabled, false), coalesce(c.accept_delegations, false)
          INTO target_active, capability_id, input_schema, output_schema, enabled, accept_delegations
          FROM agents a
          LEFT JOIN capabilities c
            ON c.agent_id = a.agent_id AND c.task_type = p_task_type AND c.custom_type IS NOT DISTINCT FROM p_custom_type
         WHERE a.agent_id = target_agent_id;
    END IF;
    SELECT i.anonymous_id INTO requester_anonymous_id FROM anonymous_ids i
     WHERE i.agent_id = key_agent_id AND i.current AND i.expires_at > now();
    RETURN NEXT;
END
$$;

-- Whether `p_target` received `p_limit` counted attempts in the last 60 s: its newest rank,
-- then the `p_limit`-th newest attempt's time.
CREATE FUNCTION parley_delegation_inbound_full(p_target uuid, p_limit integer) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_seq bigint;
BEGIN
    IF p_limit <= 0 THEN
        RETURN true;
    END IF;
    SELECT a.target_seq INTO v_seq FROM delegation_attempts a
     WHERE a.target_agent_id = p_target AND a.target_seq IS NOT NULL ORDER BY a.target_seq DESC LIMIT 1;
    IF coalesce(v_seq, 0) < p_limit THEN
        RETURN false;
    END IF;
    RETURN (SELECT a.created_at > now() - interval '60 seconds' FROM delegation_attempts a
             WHERE a.target_agent_id = p_target AND a.target_seq = v_seq - p_limit + 1);
END
$$;

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
CREATE FUNCTION parley_delegation_offer(
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

-- A new delegation with its first attempt: the row (the `p_seq`-th of its requester, in
-- `request`), then `parley_delegation_offer` for attempt 1. Answers whether that attempt is
-- live (false: its target was at its inbound limit, and the caller looks for the next one) and
-- the delegation's record as `parley_delegation_record` makes it.
CREATE FUNCTION parley_delegation_make(
    p_delegation uuid, p_request uuid, p_requester uuid, p_task_type text, p_custom_type text, p_input jsonb,
    p_requested_target uuid, p_timeout_ms bigint, p_fallback_enabled boolean, p_max_retries integer,
    p_created_at timestamptz, p_seq bigint,
    p_task uuid, p_target uuid, p_target_anonymous uuid, p_requester_anonymous uuid, p_capability uuid,
    p_output_schema jsonb, p_accept_deadline timestamptz, p_deadline timestamptz, p_timer_id text
) RETURNS TABLE (live boolean, delegation_record jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO delegations (delegation_id, request_id, requester_agent_id, task_type, custom_type, input,
                             requested_target, timeout_ms, fallback_enabled, max_retries, retries_used, status,
                             created_at, updated_at, requester_seq)
    VALUES (p_delegation, p_request, p_requester, p_task_type, p_custom_type, p_input, p_requested_target,
            p_timeout_ms, p_fallback_enabled, p_max_retries, 0, 'request', p_created_at, p_created_at, p_seq);
    live := parley_delegation_offer(p_delegation, 1, p_task, p_target, p_target_anonymous, p_requester_anonymous,
                                    p_capability, p_output_schema, p_created_at, p_accept_deadline, p_deadline,
                                    p_timer_id);
    delegation_record := parley_delegation_record(p_delegation);
    RETURN NEXT;
END
$$;
