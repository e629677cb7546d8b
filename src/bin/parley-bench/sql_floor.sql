-- The SQL a turn cycle cannot avoid, as one pgbench transaction (run with -M prepared; each
-- client is one agent, `floor-user-<client_id>`). Claim: the agent's oldest parked turn, FOR
-- UPDATE SKIP LOCKED, marked claimed, and its history read; commit. Respond: the agent's turn
-- and the answer stored, the next turn parked at the back of the queue; commit.
-- `-D timers=1` adds the two timer-row moves (park -> claim, claim -> park); `-D notify=1` adds
-- a NOTIFY inside the respond's commit.
BEGIN;
UPDATE floor_tasks
   SET state = 'claimed', claim_generation = claim_generation + 1,
       claim_token_hash = sha256(convert_to(random()::text, 'UTF8')),
       claim_expires_at = now() + interval '60 seconds', updated_at = now()
 WHERE task_id = (SELECT task_id FROM floor_tasks
                   WHERE awaiting_user_id = 'floor-user-' || :client_id AND state = 'waiting_for_agent'
                   ORDER BY first_parked_at, task_id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING task_id AS task, turn_count AS turns \gset
\if :timers
UPDATE floor_timers SET kind = 'claim', run_at = now() + interval '60 seconds' WHERE task_id = :task;
\endif
SELECT turn_number, side, action, parts FROM floor_messages WHERE task_id = :task ORDER BY turn_number;
COMMIT;
BEGIN;
INSERT INTO floor_messages (message_id, task_id, turn_number, side, action, parts) VALUES
    (gen_random_uuid(), :task, :turns, 'candidate', 'counter',
     '[{"kind": "data", "data": {"action": "counter", "message": "my counter", "assessment": {"reasoning": "Because the profiles support a counter"}}}]'),
    (gen_random_uuid(), :task, :turns + 1, 'source', 'counter',
     '[{"kind": "data", "data": {"action": "counter", "message": "The system negotiator answers with a counter of its own", "assessment": {"reasoning": "A partial match"}}}]');
UPDATE floor_tasks
   SET state = 'waiting_for_agent', turn_count = turn_count + 2, first_parked_at = now(),
       claim_token_hash = NULL, claim_expires_at = NULL, updated_at = now()
 WHERE task_id = :task;
\if :timers
UPDATE floor_timers SET kind = 'park', run_at = now() + interval '1 hour' WHERE task_id = :task;
\endif
\if :notify
SELECT pg_notify('floor_turns', 'floor-user-' || :client_id);
\endif
COMMIT;
