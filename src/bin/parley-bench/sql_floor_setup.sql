-- The SQL floor of a turn cycle (see sql_floor.sql): tables shaped like Parley's `tasks`,
-- `messages` and timer rows, in the pgbench scratch database. `floor_seed(clients, per_client)`
-- parks `per_client` turns for each pgbench client, each with its turn 0 stored.
DROP TABLE IF EXISTS floor_timers, floor_messages, floor_tasks;

CREATE TABLE floor_tasks (
    task_id           UUID PRIMARY KEY,
    state             TEXT NOT NULL CHECK (state IN ('working', 'waiting_for_agent', 'claimed', 'completed')),
    source_user_id    TEXT NOT NULL,
    candidate_user_id TEXT NOT NULL,
    source_context    JSONB NOT NULL,
    candidate_context JSONB NOT NULL,
    max_turns         INTEGER NOT NULL,
    turn_count        INTEGER NOT NULL,
    awaiting_user_id  TEXT,
    first_parked_at   TIMESTAMPTZ,
    claim_token_hash  BYTEA,
    claim_generation  BIGINT NOT NULL DEFAULT 0,
    claim_expires_at  TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX floor_tasks_parked_idx ON floor_tasks (awaiting_user_id, first_parked_at, task_id)
    WHERE state = 'waiting_for_agent';

CREATE TABLE floor_messages (
    message_id  UUID PRIMARY KEY,
    task_id     UUID NOT NULL REFERENCES floor_tasks,
    turn_number INTEGER NOT NULL,
    side        TEXT NOT NULL,
    action      TEXT NOT NULL,
    parts       JSONB NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (task_id, turn_number)
);

-- One armed timer per task, moved between its park and claim deadlines (the variant with timers).
CREATE TABLE floor_timers (
    task_id UUID PRIMARY KEY REFERENCES floor_tasks,
    kind    TEXT NOT NULL,
    run_at  TIMESTAMPTZ NOT NULL
);

CREATE OR REPLACE FUNCTION floor_seed(clients integer, per_client integer) RETURNS void LANGUAGE sql AS $$
    INSERT INTO floor_tasks (task_id, state, source_user_id, candidate_user_id, source_context,
                             candidate_context, max_turns, turn_count, awaiting_user_id, first_parked_at)
    SELECT gen_random_uuid(), 'waiting_for_agent', 'floor-source-' || n, 'floor-user-' || c,
           jsonb_build_object('profile', repeat('source profile ', 30), 'intent', repeat('intent ', 10)),
           jsonb_build_object('profile', repeat('candidate profile ', 25), 'intent', repeat('intent ', 10)),
           6, 1, 'floor-user-' || c, now() - (n || ' ms')::interval
    FROM generate_series(0, clients - 1) c, generate_series(1, per_client) n;
    INSERT INTO floor_messages (message_id, task_id, turn_number, side, action, parts)
    SELECT gen_random_uuid(), task_id, 0, 'source', 'propose',
           '[{"kind": "data", "data": {"action": "propose", "message": "A first proposal of about the usual length for a turn", "assessment": {"reasoning": "Both profiles mention the same field"}}}]'
    FROM floor_tasks;
    INSERT INTO floor_timers (task_id, kind, run_at) SELECT task_id, 'park', now() + interval '1 hour' FROM floor_tasks;
    ANALYZE floor_tasks;
    ANALYZE floor_messages;
    ANALYZE floor_timers;
$$;
