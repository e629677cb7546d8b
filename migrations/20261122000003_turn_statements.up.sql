-- One round trip per turn-delivery call.
--
-- A pickup is one call of `parley_pickup`; a respond is one read (the snapshot the engine plans
-- from) and one call of `parley_respond`, which applies the plan only if the claim is still the
-- one the snapshot saw. The pieces every path shares are functions too, called by the Rust
-- engine and by these: `parley_store_turn` (message + event), `parley_park` (park + timer +
-- wake), `parley_record_event` (event + NOTIFY). Timers are armed through `parley_jobs.*`
-- (installed by the timer crate's setup), in the same transaction as the change.
--
-- Which state follows which stays in the Rust transition tables: the callers pass the states.

-- Claims are fenced by generation. The claim token carries its generation under an HMAC that
-- only the service can make, so the database no longer needs the token's hash: a respond's
-- token is checked in the service and its generation compared here. A turn answered under a
-- claim records that claim's generation, which is how a retried respond finds it.
ALTER TABLE tasks DROP CONSTRAINT tasks_claim_complete;
ALTER TABLE tasks DROP COLUMN claim_token_hash;
ALTER TABLE tasks ADD CONSTRAINT tasks_claim_complete CHECK ((state = 'claimed') = (claim_expires_at IS NOT NULL));
DROP INDEX messages_claim_token_idx;
ALTER TABLE messages DROP COLUMN claim_token_hash;
ALTER TABLE messages ADD COLUMN claim_generation BIGINT;

-- The hub's queue depth (tasks not yet terminal), kept exact by triggers in the transactions
-- that change it, in 16 rows so that concurrent starts and ends rarely wait on one another.
-- Reading it is a sum over 16 rows instead of a count over every active task.
CREATE TABLE task_counts (
    shard   SMALLINT PRIMARY KEY,
    active  BIGINT NOT NULL DEFAULT 0
);
INSERT INTO task_counts (shard, active) SELECT s, 0 FROM generate_series(0, 15) s;
UPDATE task_counts SET active = (
    SELECT count(*) FROM tasks WHERE state IN ('submitted', 'working', 'waiting_for_agent', 'claimed'))
WHERE shard = 0;

CREATE FUNCTION parley_task_is_active(p_state text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_state IN ('submitted', 'working', 'waiting_for_agent', 'claimed') $$;

CREATE FUNCTION parley_count_active_tasks() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    delta integer := 0;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') AND parley_task_is_active(NEW.state) THEN delta := delta + 1; END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') AND parley_task_is_active(OLD.state) THEN delta := delta - 1; END IF;
    IF delta <> 0 THEN
        UPDATE task_counts SET active = active + delta WHERE shard = pg_backend_pid() % 16;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks
    FOR EACH ROW EXECUTE FUNCTION parley_count_active_tasks();
CREATE TRIGGER tasks_count_update AFTER UPDATE OF state ON tasks
    FOR EACH ROW WHEN (parley_task_is_active(OLD.state) IS DISTINCT FROM parley_task_is_active(NEW.state))
    EXECUTE FUNCTION parley_count_active_tasks();
CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION parley_count_active_tasks();

-- Records an event for the live stream and announces it (delivered at commit).
CREATE FUNCTION parley_record_event(
    p_kind text, p_opportunity uuid, p_source_user text, p_candidate_user text, p_data jsonb
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    id bigint;
BEGIN
    INSERT INTO events (kind, opportunity_id, source_user_id, candidate_user_id, data)
    VALUES (p_kind, p_opportunity, p_source_user, p_candidate_user, p_data)
    RETURNING event_id INTO id;
    PERFORM pg_notify('parley_events', json_build_object(
        'id', id, 'kind', p_kind, 'source_user_id', p_source_user,
        'candidate_user_id', p_candidate_user, 'data', p_data)::text);
    RETURN id;
END
$$;

-- Stores one turn as its message, and its `negotiation.turn` event (the action, never scores).
-- A turn number stored twice fails on messages_task_turn_key.
CREATE FUNCTION parley_store_turn(
    p_task uuid, p_opportunity uuid, p_source_user text, p_candidate_user text,
    p_message_id uuid, p_turn_number integer, p_side text, p_user text, p_action text, p_parts jsonb,
    p_played_by text, p_agent uuid, p_claim_generation bigint, p_request_hash bytea, p_response jsonb
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO messages (message_id, task_id, turn_number, side, sender_id, action, parts, played_by,
                          agent_id, claim_generation, request_hash, response)
    VALUES (p_message_id, p_task, p_turn_number, p_side, 'agent:' || p_user, p_action, p_parts, p_played_by,
            p_agent, p_claim_generation, p_request_hash, p_response);
    PERFORM parley_record_event('negotiation.turn', p_opportunity, p_source_user, p_candidate_user,
        jsonb_build_object('negotiationId', p_task, 'opportunityId', p_opportunity,
                           'turnNumber', p_turn_number, 'action', p_action));
END
$$;

-- Parks a locked `working` task for `p_user`'s personal agent at turn `p_turn`: state, the park
-- timer (when `p_park_timeout` is given: mixed negotiations only) and the wake-up of that
-- user's long-polls at commit. Returns when the turn was first parked.
CREATE FUNCTION parley_park(
    p_task uuid, p_from text, p_to text, p_user text, p_turn integer, p_park_timeout interval, p_timer_id text
) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    parked_at timestamptz;
    generation bigint;
BEGIN
    UPDATE tasks SET state = p_to, awaiting_user_id = p_user, first_parked_at = now(), turn_count = p_turn,
                     updated_at = now()
     WHERE task_id = p_task AND state = p_from
    RETURNING first_parked_at, claim_generation INTO parked_at, generation;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task % is not %', p_task, p_from;
    END IF;
    IF p_park_timeout IS NOT NULL THEN
        PERFORM parley_jobs.arm_park_timeout(p_task, p_turn, generation, parked_at + p_park_timeout, p_timer_id);
    END IF;
    PERFORM pg_notify('parley_turns', p_user);
    RETURN parked_at;
END
$$;

-- The turns of a task in order, as `domain::Turn` reads them.
CREATE FUNCTION parley_history(p_task uuid) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'turnNumber', turn_number, 'side', side, 'action', action,
               'reasoning', parts -> 0 -> 'data' -> 'assessment' -> 'reasoning',
               'suggestedRoles', parts -> 0 -> 'data' -> 'assessment' -> 'suggestedRoles',
               'message', parts -> 0 -> 'data' -> 'message') ORDER BY turn_number), '[]'::jsonb)
    FROM messages WHERE task_id = p_task
$$;

-- The agent an API key speaks for, and whether it may act as `p_agent` (NULL: as itself):
-- `auth` is `unknown_key` (unknown, revoked or expired), `other_agent` (the key is another
-- agent's), `inactive` or `ok`. Always one row.
CREATE FUNCTION parley_agent_of_key(p_key_hash bytea, p_agent uuid)
RETURNS TABLE (auth text, agent_id uuid, owner_user_id text)
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN a.agent_id IS NULL THEN 'unknown_key'
                WHEN p_agent IS NOT NULL AND p_agent <> a.agent_id THEN 'other_agent'
                WHEN a.status <> 'active' THEN 'inactive'
                ELSE 'ok' END,
           a.agent_id, a.owner_user_id
      FROM (SELECT 1) one
      LEFT JOIN (api_keys k JOIN agents a ON a.agent_id = k.agent_id)
        ON k.key_hash = p_key_hash AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
$$;

-- Pickup (DESIGN.md §5), authentication included: the agent's live claim, else the oldest
-- turn parked for its user, claimed (`p_from` -> `p_to`) under the next generation with the
-- park timer swapped for the claim timer. `auth` as `parley_agent_of_key` says it; with `ok`
-- and a NULL task_id, nothing is parked for the agent's user. `claimed_now` is false when the
-- agent's live claim is handed back unchanged.
CREATE FUNCTION parley_pickup(
    p_key_hash bytea, p_agent uuid, p_from text, p_to text, p_claim_timeout interval, p_timer_id text
) RETURNS TABLE (
    auth text, key_agent_id uuid, key_owner_user_id text, claimed_now boolean,
    task_id uuid, conversation_id uuid, opportunity_id uuid, state text, source_user_id text,
    candidate_user_id text, source_kind text, candidate_kind text, source_context jsonb,
    candidate_context jsonb, seed_assessment jsonb, index_context jsonb, discovery_query text,
    max_turns integer, turn_count integer, awaiting_user_id text, first_parked_at timestamptz,
    claim_agent_id uuid, claim_generation bigint, claim_expires_at timestamptz,
    created_at timestamptz, updated_at timestamptz, completed_at timestamptz,
    opportunity_status text, history jsonb
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_auth text;
    v_agent uuid;
    v_owner text;
    v_task uuid;
    v_generation bigint;
    v_expires timestamptz;
BEGIN
    SELECT k.auth, k.agent_id, k.owner_user_id INTO v_auth, v_agent, v_owner
      FROM parley_agent_of_key(p_key_hash, p_agent) k;
    auth := v_auth;
    key_agent_id := v_agent;
    key_owner_user_id := v_owner;
    IF v_auth <> 'ok' THEN
        RETURN NEXT;
        RETURN;
    END IF;

    SELECT t.task_id INTO v_task FROM tasks t
     WHERE t.state = p_to AND t.claim_agent_id = v_agent AND t.claim_expires_at > now()
     ORDER BY t.first_parked_at, t.task_id LIMIT 1 FOR UPDATE;
    claimed_now := NOT FOUND;
    IF claimed_now THEN
        UPDATE tasks t SET state = p_to, claim_agent_id = v_agent, claim_generation = t.claim_generation + 1,
                           claim_expires_at = now() + p_claim_timeout, updated_at = now()
         WHERE t.task_id = (SELECT p.task_id FROM tasks p
                             WHERE p.state = p_from AND p.awaiting_user_id = v_owner
                             ORDER BY p.first_parked_at, p.task_id LIMIT 1 FOR UPDATE SKIP LOCKED)
           AND t.state = p_from
        RETURNING t.task_id, t.claim_generation, t.claim_expires_at INTO v_task, v_generation, v_expires;
        IF v_task IS NULL THEN
            RETURN NEXT;
            RETURN;
        END IF;
        PERFORM parley_jobs.disarm_park_timeout(v_task);
        PERFORM parley_jobs.arm_claim_timeout(v_task, v_generation, v_expires, p_timer_id);
    END IF;

    RETURN QUERY
    SELECT 'ok'::text, v_agent, v_owner, claimed_now,
           t.task_id, t.conversation_id, t.opportunity_id, t.state, t.source_user_id,
           t.candidate_user_id, t.source_kind, t.candidate_kind, t.source_context,
           t.candidate_context, t.seed_assessment, t.index_context, t.discovery_query,
           t.max_turns, t.turn_count, t.awaiting_user_id, t.first_parked_at,
           t.claim_agent_id, t.claim_generation, t.claim_expires_at,
           t.created_at, t.updated_at, t.completed_at,
           o.status, parley_history(t.task_id)
      FROM tasks t JOIN opportunities o ON o.opportunity_id = t.opportunity_id
     WHERE t.task_id = v_task;
END
$$;

-- Respond (DESIGN.md §5), applied: only if the task is still claimed by `p_agent` under
-- `p_generation` at `p_turn_count`, unexpired, it moves `p_from` -> `p_to` (claimed -> working),
-- stores `p_turns` (the agent's turn first, then any system turn that follows it), cancels the
-- claim timer, and parks the next turn for `p_park_user` when one is given (`p_park_from` ->
-- `p_park_to`). Without `p_park_user` the task is left `working` for the engine to conclude
-- (an accept, a reject or the cap). Returns false, having changed nothing, when the claim is no
-- longer the one the caller planned from.
--
-- `p_turns`: [{messageId, turnNumber, side, userId, action, parts, playedBy}].
CREATE FUNCTION parley_respond(
    p_task uuid, p_agent uuid, p_generation bigint, p_turn_count integer, p_from text, p_to text,
    p_turns jsonb, p_request_hash bytea, p_response jsonb,
    p_park_user text, p_park_from text, p_park_to text, p_park_timeout interval, p_timer_id text
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v record;
    turn jsonb;
    n integer := 0;
BEGIN
    UPDATE tasks SET state = p_to, turn_count = p_turn_count + jsonb_array_length(p_turns),
                     awaiting_user_id = NULL, first_parked_at = NULL,
                     claim_agent_id = NULL, claim_expires_at = NULL, updated_at = now()
     WHERE task_id = p_task AND state = p_from AND claim_agent_id = p_agent AND claim_generation = p_generation
       AND claim_expires_at > now() AND turn_count = p_turn_count
    RETURNING opportunity_id, source_user_id, candidate_user_id INTO v;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    FOR turn IN SELECT value FROM jsonb_array_elements(p_turns) LOOP
        PERFORM parley_store_turn(p_task, v.opportunity_id, v.source_user_id, v.candidate_user_id,
            (turn ->> 'messageId')::uuid, (turn ->> 'turnNumber')::integer, turn ->> 'side', turn ->> 'userId',
            turn ->> 'action', turn -> 'parts', turn ->> 'playedBy',
            CASE WHEN n = 0 THEN p_agent END, CASE WHEN n = 0 THEN p_generation END,
            CASE WHEN n = 0 THEN p_request_hash END, CASE WHEN n = 0 THEN p_response END);
        n := n + 1;
    END LOOP;
    PERFORM parley_jobs.disarm_claim_timeout(p_task);
    IF p_park_user IS NOT NULL THEN
        PERFORM parley_park(p_task, p_park_from, p_park_to, p_park_user, p_turn_count + n, p_park_timeout, p_timer_id);
    END IF;
    RETURN true;
END
$$;
