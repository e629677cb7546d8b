-- One round trip per turn-delivery call.
--
-- The functions are PL/pgSQL: PostgreSQL keeps a PL/pgSQL function's plans for the session,
-- but parses and plans a SQL-language function's body on every call (the one exception,
-- `parley_agent_of_key`, is inlined by the planner instead).
--
-- A pickup is one call of `parley_pickup`; a respond is one read (the snapshot the engine plans
-- from) and one call of `parley_respond`, which applies the plan only if the claim is still the
-- one the snapshot saw. The pieces every path shares are functions too, called by the Rust
-- engine and by these: `parley_store_turns` (messages + events), `parley_park` (park + timer +
-- wake); and every event announces itself (`events_announce`). Timers are armed through `parley_jobs.*`
-- (installed by the timer crate's setup), in the same transaction as the change.
--
-- The transitions they make are the task table's `Claim` (waiting_for_agent -> claimed),
-- `Respond` (claimed -> working) and `Park` (working -> waiting_for_agent); a unit test of
-- `store::turn_delivery` pins those against the Rust transition table. The states are written
-- as literals so that the planner can use the partial indexes on `state`.

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

-- Recovery reads only the tasks left `submitted` or `working`. The narrower index takes an
-- entry only from those row versions, instead of from every version of every active task (each
-- claim, respond and park writes a new version of the task row).
DROP INDEX tasks_active_idx;
CREATE INDEX tasks_runnable_idx ON tasks (updated_at) WHERE state IN ('submitted', 'working');

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

CREATE FUNCTION parley_count_active_tasks() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    delta integer := 0;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.state IN ('submitted', 'working', 'waiting_for_agent', 'claimed') THEN
        delta := delta + 1;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.state IN ('submitted', 'working', 'waiting_for_agent', 'claimed') THEN
        delta := delta - 1;
    END IF;
    IF delta <> 0 THEN
        UPDATE task_counts SET active = active + delta WHERE shard = pg_backend_pid() % 16;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks
    FOR EACH ROW EXECUTE FUNCTION parley_count_active_tasks();
CREATE TRIGGER tasks_count_update AFTER UPDATE OF state ON tasks
    FOR EACH ROW WHEN ((OLD.state IN ('submitted', 'working', 'waiting_for_agent', 'claimed'))
                       <> (NEW.state IN ('submitted', 'working', 'waiting_for_agent', 'claimed')))
    EXECUTE FUNCTION parley_count_active_tasks();
CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION parley_count_active_tasks();

-- Events announce themselves: each statement that inserts events NOTIFYs every new one, in
-- id order, with the payload the live stream reads (`store::events::Event`). Delivered at
-- commit, like any NOTIFY, so nothing is announced that did not happen.
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

-- Stores turns as their messages, and a `negotiation.turn` event for each (the action, never
-- scores), in one statement. A turn number stored twice fails on messages_task_turn_key.
-- `p_turns`: [{messageId, turnNumber, side, userId, action, parts, playedBy,
--              agentId?, claimGeneration?, requestHash? (hex), response?}], in turn order.
CREATE FUNCTION parley_store_turns(
    p_task uuid, p_opportunity uuid, p_source_user text, p_candidate_user text, p_turns jsonb
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH t AS (
        SELECT * FROM jsonb_to_recordset(p_turns) AS x(
            "messageId" uuid, "turnNumber" integer, side text, "userId" text, action text, parts jsonb,
            "playedBy" text, "agentId" uuid, "claimGeneration" bigint, "requestHash" text, response jsonb)
    ), stored AS (
        INSERT INTO messages (message_id, task_id, turn_number, side, sender_id, action, parts, played_by,
                              agent_id, claim_generation, request_hash, response)
        SELECT "messageId", p_task, "turnNumber", side, 'agent:' || "userId", action, parts, "playedBy",
               "agentId", "claimGeneration", decode("requestHash", 'hex'), response
          FROM t
    )
    INSERT INTO events (kind, opportunity_id, source_user_id, candidate_user_id, data)
    SELECT 'negotiation.turn', p_opportunity, p_source_user, p_candidate_user,
           jsonb_build_object('negotiationId', p_task, 'opportunityId', p_opportunity,
                              'turnNumber', "turnNumber", 'action', action)
      FROM t ORDER BY "turnNumber";
END
$$;

-- What follows the parking of turn `p_turn` for `p_user` (the task row already says so): the
-- park timer when `p_park_timeout` is given (mixed negotiations only; a claim timer still
-- pending, as after a respond, becomes it), and the wake-up of that user's long-polls at commit.
CREATE FUNCTION parley_parked(
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

-- Parks a locked `working` task for `p_user`'s personal agent at turn `p_turn`, with what
-- follows (`parley_parked`). Returns when the turn was first parked.
CREATE FUNCTION parley_park(
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

-- The turns of a task in order, as `domain::Turn` reads them.
CREATE FUNCTION parley_history(p_task uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'turnNumber', turn_number, 'side', side, 'action', action,
                   'reasoning', parts -> 0 -> 'data' -> 'assessment' -> 'reasoning',
                   'suggestedRoles', parts -> 0 -> 'data' -> 'assessment' -> 'suggestedRoles',
                   'message', parts -> 0 -> 'data' -> 'message') ORDER BY turn_number), '[]'::jsonb)
            FROM messages WHERE task_id = p_task);
END
$$;

-- The agent an API key speaks for, and whether it may act as `p_agent` (NULL: as itself):
-- `auth` is `unknown_key` (unknown, revoked or expired), `other_agent` (the key is another
-- agent's), `inactive` or `ok`. Always one row.
-- (LANGUAGE sql on purpose: a STABLE set-returning SQL function is inlined into the calling
-- query when it is planned, so it costs nothing per call.)
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

-- Pickup, authentication included: the agent's live claim, else the oldest
-- turn parked for its user, claimed under the next generation with the
-- park timer swapped for the claim timer. `auth` as `parley_agent_of_key` says it; with `ok`
-- and a NULL task_id, nothing is parked for the agent's user. `claimed_now` is false when the
-- agent's live claim is handed back unchanged.
CREATE FUNCTION parley_pickup(
    p_key_hash bytea, p_agent uuid, p_claim_timeout interval, p_timer_id text
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
     WHERE t.state = 'claimed' AND t.claim_agent_id = v_agent AND t.claim_expires_at > now()
     ORDER BY t.first_parked_at, t.task_id LIMIT 1 FOR UPDATE;
    claimed_now := NOT FOUND;
    IF claimed_now THEN
        UPDATE tasks t SET state = 'claimed', claim_agent_id = v_agent, claim_generation = t.claim_generation + 1,
                           claim_expires_at = now() + p_claim_timeout, updated_at = now()
         WHERE t.task_id = (SELECT p.task_id FROM tasks p
                             WHERE p.state = 'waiting_for_agent' AND p.awaiting_user_id = v_owner
                             ORDER BY p.first_parked_at, p.task_id LIMIT 1 FOR UPDATE SKIP LOCKED)
           AND t.state = 'waiting_for_agent'
        RETURNING t.task_id, t.claim_generation, t.claim_expires_at INTO v_task, v_generation, v_expires;
        IF v_task IS NULL THEN
            RETURN NEXT;
            RETURN;
        END IF;
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

-- Respond, applied: only if the task is still claimed by `p_agent` under
-- `p_generation` at `p_turn_count`, unexpired, and `p_key_hash` is a live key of that active
-- agent, it moves claimed -> working, stores `p_turns`
-- (the agent's turn first, then any system turn that follows it; see `parley_store_turns`),
-- and parks the next turn for `p_park_user` when one is given, the claim timer becoming its
-- park timer. Without `p_park_user` the task is left `working` for the engine to conclude (an
-- accept, a reject or the cap). Returns false, having changed nothing, when the claim is no
-- longer the one the caller planned from.
CREATE FUNCTION parley_respond(
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
        PERFORM parley_parked(p_task, p_park_user, turns, p_generation, v.first_parked_at, p_park_timeout, p_timer_id);
    END IF;
    RETURN true;
END
$$;
