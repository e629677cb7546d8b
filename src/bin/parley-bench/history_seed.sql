-- The history phase's clones: a year of finished negotiations and delegations copied from the
-- templates the API made in this database, each copy with new ids (UUIDv7 of its own time), new
-- users and agents, and its template's times shifted to its place in the 365 days before today.
--
-- Parameters (settings of the session): `parley_bench.n` (negotiations, and as many
-- delegations), `.agents` (seeded agents, one per regular user), `.capabilities` (how many of
-- those agents offer one), `.heavy` and `.three` (the users, registered through the API with an
-- agent each, in about one negotiation in ten and in exactly three).
--
-- Only raw rows are written, with triggers and foreign-key checks off
-- (`session_replication_role = replica`): what the service derives from history it derives
-- itself afterwards, through its own functions (trust records by `parley_refresh_trust_records`
-- and the capabilities' triggers). No summary of any kind is written here.
--
-- Users: index 0 is the heavy user, 1 the three-item user, 2-6 five users in about one
-- negotiation in a hundred each (`hist-big-<n>`), then `hist-u-<k>`, each with one seeded agent.
-- Clone i is dated `year start + i/n of the year`, so the rows go in in time order (the id
-- indexes grow at their right edge).

BEGIN;
SET LOCAL session_replication_role = replica;

CREATE TEMP TABLE p ON COMMIT DROP AS
SELECT current_setting('parley_bench.n')::bigint AS n,
       current_setting('parley_bench.agents')::bigint AS a,
       current_setting('parley_bench.capabilities')::bigint AS caps,
       current_setting('parley_bench.heavy') AS heavy,
       current_setting('parley_bench.three') AS three,
       date_trunc('day', now()) - interval '365 days' AS y0;

-- A UUIDv7 of time `ts` whose other bits come from `seed`.
CREATE OR REPLACE FUNCTION pg_temp.uuid7(ts timestamptz, seed text) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7' || substr(h, 1, 3) || '8'
            || substr(h, 4, 15))::uuid
      FROM md5(seed) AS h
$$;
-- The id clone `i` (dated `ts`) gives the template row whose id was `old`.
CREATE OR REPLACE FUNCTION pg_temp.nid(ts timestamptz, i bigint, old uuid) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
    SELECT pg_temp.uuid7(ts, i::text || ':' || old::text)
$$;
-- JSON (or text) of a template row with the template's users and ids replaced by the clone's.
CREATE OR REPLACE FUNCTION pg_temp.rep(x text, su0 text, su text, cu0 text, cu text, o0 uuid, o uuid, t0 uuid, t uuid)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT replace(replace(replace(replace(x, su0, su), cu0, cu), o0::text, o::text), t0::text, t::text)
$$;

-- Users and their agents.
CREATE TEMP TABLE hu ON COMMIT DROP AS
SELECT 0 AS idx, p.heavy AS user_id, (SELECT agent_id FROM agents WHERE owner_user_id = p.heavy LIMIT 1) AS agent_id FROM p
UNION ALL
SELECT 1, p.three, (SELECT agent_id FROM agents WHERE owner_user_id = p.three LIMIT 1) FROM p
UNION ALL
SELECT 2 + b, 'hist-big-' || b, (SELECT agent_id FROM agents WHERE owner_user_id = 'hist-big-' || b LIMIT 1)
  FROM generate_series(0, 4) b
UNION ALL
SELECT 7 + k, 'hist-u-' || k, pg_temp.uuid7(p.y0 - interval '30 days' + k * interval '1 second', 'agent:' || k)
  FROM p, generate_series(0, p.a - 1) k;
CREATE UNIQUE INDEX ON hu (idx);
ANALYZE hu;

INSERT INTO agents (agent_id, owner_user_id, name, description, created_at, updated_at, last_seen_at)
SELECT h.agent_id, h.user_id, 'agent of ' || h.user_id, 'seeded history', p.y0 - interval '30 days', p.y0, now() - interval '1 day'
  FROM hu h, p WHERE h.idx >= 7;

-- Anonymous ids: one a month over the year (each lived a day, as ids are replaced on the first
-- use after they expire), and the current one.
INSERT INTO anonymous_ids (anonymous_id, agent_id, issued_at, expires_at, current)
SELECT pg_temp.uuid7(p.y0 + m * interval '30 days', 'anon:' || h.idx || ':' || m), h.agent_id,
       p.y0 + m * interval '30 days', p.y0 + m * interval '30 days' + interval '1 day', false
  FROM hu h, p, generate_series(0, 12) m WHERE h.idx >= 7;
INSERT INTO anonymous_ids (anonymous_id, agent_id, issued_at, expires_at, current)
SELECT pg_temp.uuid7(now() - interval '1 hour', 'anon:' || h.idx || ':now'), h.agent_id,
       now() - interval '1 hour', now() + interval '23 hours', true
  FROM hu h WHERE h.idx >= 7;

-- Negotiation templates: every opportunity the API made, with its users and their agents.
CREATE TEMP TABLE tpl ON COMMIT DROP AS
SELECT (row_number() OVER (ORDER BY o.opportunity_id) - 1)::bigint AS k, o.opportunity_id AS topp, o.created_at AS t0,
       o.source_user_id AS tsu, o.candidate_user_id AS tcu,
       (SELECT agent_id FROM agents WHERE owner_user_id = o.source_user_id LIMIT 1) AS tsa,
       (SELECT agent_id FROM agents WHERE owner_user_id = o.candidate_user_id LIMIT 1) AS tca
  FROM opportunities o;

-- The clones: template, time, users.
CREATE TEMP TABLE cl ON COMMIT DROP AS
SELECT x.i, t.k, x.base, x.base - t.t0 AS shift, t.topp, t.tsu, t.tcu, t.tsa, t.tca,
       s.user_id AS su, s.agent_id AS sa, c.user_id AS cu, c.agent_id AS ca
  FROM (SELECT i, p.y0 + (i * 365 * 86400.0 / p.n) * interval '1 second' AS base,
               (i * 48271 % 2147483647) % (SELECT count(*) FROM tpl) AS k,
               CASE WHEN i % 20 = 0 THEN 0
                    WHEN i % 100 BETWEEN 1 AND 5 THEN 1 + i % 100
                    ELSE 7 + (i * 2654435761) % p.a END AS si,
               CASE WHEN i % 20 = 10 THEN 0
                    WHEN i IN (11, 12, 13) THEN 1
                    WHEN i % 100 BETWEEN 51 AND 55 THEN i % 100 - 49
                    ELSE 7 + ((i * 2654435761) % p.a + 1 + (i * 40503) % (p.a - 1)) % p.a END AS ci
          FROM p, generate_series(0, p.n - 1) i) x
  JOIN tpl t ON t.k = x.k
  JOIN hu s ON s.idx = x.si
  JOIN hu c ON c.idx = x.ci
 ORDER BY x.i;

INSERT INTO opportunities (opportunity_id, status, score, source_user_id, candidate_user_id, seed_assessment,
                           created_at, updated_at, request_hash)
SELECT pg_temp.nid(c.base, c.i, o.opportunity_id), o.status, o.score, c.su, c.cu,
       pg_temp.rep(o.seed_assessment::text, c.tsu, c.su, c.tcu, c.cu, c.topp, pg_temp.nid(c.base, c.i, c.topp),
                   c.topp, c.topp)::jsonb,
       o.created_at + c.shift, o.updated_at + c.shift, o.request_hash
  FROM cl c JOIN opportunities o ON o.opportunity_id = c.topp;

INSERT INTO conversations (conversation_id, opportunity_id, created_at)
SELECT pg_temp.nid(c.base, c.i, v.conversation_id), pg_temp.nid(c.base, c.i, c.topp), v.created_at + c.shift
  FROM cl c JOIN conversations v ON v.opportunity_id = c.topp;

INSERT INTO conversation_participants (conversation_id, participant_id, user_id, side)
SELECT pg_temp.nid(c.base, c.i, v.conversation_id), replace(replace(cp.participant_id, c.tsu, c.su), c.tcu, c.cu),
       CASE cp.user_id WHEN c.tsu THEN c.su WHEN c.tcu THEN c.cu ELSE cp.user_id END, cp.side
  FROM cl c JOIN conversations v ON v.opportunity_id = c.topp
  JOIN conversation_participants cp ON cp.conversation_id = v.conversation_id;

CREATE TEMP TABLE tpl_tasks ON COMMIT DROP AS SELECT * FROM tasks;

INSERT INTO tasks (task_id, conversation_id, opportunity_id, state, source_user_id, candidate_user_id, source_kind,
                   candidate_kind, source_context, candidate_context, seed_assessment, index_context, discovery_query,
                   max_turns, turn_count, awaiting_user_id, first_parked_at, claim_agent_id, claim_generation,
                   claim_expires_at, created_at, updated_at, completed_at, round, previous_rounds)
SELECT x.task_id, pg_temp.nid(c.base, c.i, t.conversation_id), x.opp, t.state, c.su, c.cu, t.source_kind,
       t.candidate_kind,
       pg_temp.rep(t.source_context::text, c.tsu, c.su, c.tcu, c.cu, c.topp, x.opp, t.task_id, x.task_id)::jsonb,
       pg_temp.rep(t.candidate_context::text, c.tsu, c.su, c.tcu, c.cu, c.topp, x.opp, t.task_id, x.task_id)::jsonb,
       pg_temp.rep(t.seed_assessment::text, c.tsu, c.su, c.tcu, c.cu, c.topp, x.opp, t.task_id, x.task_id)::jsonb,
       t.index_context, t.discovery_query, t.max_turns, t.turn_count,
       CASE t.awaiting_user_id WHEN c.tsu THEN c.su WHEN c.tcu THEN c.cu END, t.first_parked_at + c.shift,
       CASE t.claim_agent_id WHEN c.tsa THEN c.sa WHEN c.tca THEN c.ca END, t.claim_generation,
       t.claim_expires_at + c.shift, t.created_at + c.shift, t.updated_at + c.shift, t.completed_at + c.shift,
       t.round,
       pg_temp.rep(t.previous_rounds::text, c.tsu, c.su, c.tcu, c.cu, c.topp, x.opp, t.task_id, x.task_id)::jsonb
  FROM cl c JOIN tpl_tasks t ON t.opportunity_id = c.topp,
       LATERAL (SELECT pg_temp.nid(c.base, c.i, t.task_id) AS task_id, pg_temp.nid(c.base, c.i, c.topp) AS opp) x;

INSERT INTO messages (message_id, task_id, turn_number, side, sender_id, action, parts, played_by, agent_id,
                      request_hash, response, created_at, claim_generation, fallback_reason, decided_by)
SELECT pg_temp.nid(c.base, c.i, m.message_id), x.task_id, m.turn_number, m.side,
       replace(replace(m.sender_id, c.tsu, c.su), c.tcu, c.cu), m.action,
       pg_temp.rep(m.parts::text, c.tsu, c.su, c.tcu, c.cu, c.topp, x.opp, m.task_id, x.task_id)::jsonb,
       m.played_by, CASE m.agent_id WHEN c.tsa THEN c.sa WHEN c.tca THEN c.ca END, m.request_hash,
       pg_temp.rep(m.response::text, c.tsu, c.su, c.tcu, c.cu, c.topp, x.opp, m.task_id, x.task_id)::jsonb,
       m.created_at + c.shift, m.claim_generation, m.fallback_reason, m.decided_by
  FROM cl c JOIN tpl_tasks t ON t.opportunity_id = c.topp
  JOIN messages m ON m.task_id = t.task_id,
       LATERAL (SELECT pg_temp.nid(c.base, c.i, m.task_id) AS task_id, pg_temp.nid(c.base, c.i, c.topp) AS opp) x;

INSERT INTO artifacts (artifact_id, task_id, name, parts, metadata, created_at)
SELECT pg_temp.nid(c.base, c.i, a.artifact_id), x.task_id, a.name,
       pg_temp.rep(a.parts::text, c.tsu, c.su, c.tcu, c.cu, c.topp, x.opp, a.task_id, x.task_id)::jsonb,
       pg_temp.rep(a.metadata::text, c.tsu, c.su, c.tcu, c.cu, c.topp, x.opp, a.task_id, x.task_id)::jsonb,
       a.created_at + c.shift
  FROM cl c JOIN tpl_tasks t ON t.opportunity_id = c.topp
  JOIN artifacts a ON a.task_id = t.task_id,
       LATERAL (SELECT pg_temp.nid(c.base, c.i, a.task_id) AS task_id, pg_temp.nid(c.base, c.i, c.topp) AS opp) x;

INSERT INTO opportunity_decisions (opportunity_id, user_id, decision, decided_at)
SELECT pg_temp.nid(c.base, c.i, c.topp), CASE d.user_id WHEN c.tsu THEN c.su WHEN c.tcu THEN c.cu ELSE d.user_id END,
       d.decision, d.decided_at + c.shift
  FROM cl c JOIN opportunity_decisions d ON d.opportunity_id = c.topp;

-- A sample of clones for the phase to read through the API beside their templates.
DROP TABLE IF EXISTS parley_bench_samples;
CREATE TABLE parley_bench_samples AS
SELECT pg_temp.nid(c.base, c.i, t.task_id) AS clone_task, t.task_id AS template_task,
       pg_temp.nid(c.base, c.i, c.topp) AS clone_opportunity, c.topp AS template_opportunity
  FROM cl c JOIN tpl_tasks t ON t.opportunity_id = c.topp, p
 WHERE c.i % greatest(p.n / 40, 1) = 0 OR c.i IN (11, 12, 13);

-- Delegation templates: every delegation the API made. Clone j's requester is a seeded agent
-- without a capability; its attempt m goes to the capability holder `caps` places on from its
-- first (two attempts never to one target).
CREATE TEMP TABLE dtpl ON COMMIT DROP AS
SELECT (row_number() OVER (ORDER BY d.delegation_id) - 1)::bigint AS k, d.delegation_id AS td, d.created_at AS t0
  FROM delegations d;

CREATE TEMP TABLE dcl ON COMMIT DROP AS
SELECT x.j, t.k, t.td, x.base, x.base - t.t0 AS shift, x.base_period, x.fi, r.idx AS ri, r.agent_id AS ra,
       r.user_id AS ru
  FROM (SELECT j, p.y0 + (j * 365 * 86400.0 / p.n + 1.5) * interval '1 second' AS base,
               floor(j * 365.0 / p.n / 30)::int AS base_period,
               (j * 48271 % 2147483647) % (SELECT count(*) FROM dtpl) AS k,
               (j * 40503) % p.caps AS fi,
               7 + p.caps + (j * 2654435761) % greatest(p.a - p.caps, 1) AS ri
          FROM p, generate_series(0, p.n - 1) j) x
  JOIN dtpl t ON t.k = x.k
  JOIN hu r ON r.idx = x.ri
 ORDER BY x.j;

-- The target of attempt `m` of clone j, and anonymous ids as of a period.
CREATE OR REPLACE FUNCTION pg_temp.target(fi bigint, m int, caps bigint) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT 7 + (fi + m - 1) % caps
$$;
CREATE OR REPLACE FUNCTION pg_temp.anon(idx bigint, period int, y0 timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
    SELECT pg_temp.uuid7(y0 + least(period, 12) * interval '30 days', 'anon:' || idx || ':' || least(period, 12))
$$;

INSERT INTO delegations (delegation_id, request_id, requester_agent_id, task_type, custom_type, input,
                         requested_target, timeout_ms, fallback_enabled, max_retries, retries_used, status, output,
                         created_at, updated_at, ended_at, requester_seq)
SELECT pg_temp.nid(c.base, c.j, d.delegation_id), gen_random_uuid(), c.ra, d.task_type, d.custom_type, d.input,
       CASE WHEN d.requested_target IS NOT NULL THEN pg_temp.anon(pg_temp.target(c.fi, 1, p.caps), c.base_period, p.y0) END,
       d.timeout_ms, d.fallback_enabled, d.max_retries, d.retries_used, d.status, d.output,
       d.created_at + c.shift, d.updated_at + c.shift, d.ended_at + c.shift,
       row_number() OVER (PARTITION BY c.ra ORDER BY c.j)
  FROM dcl c JOIN delegations d ON d.delegation_id = c.td, p;

INSERT INTO delegation_attempts (delegation_id, attempt, target_agent_id, target_anonymous_id, requester_anonymous_id,
                                 capability_id, output_schema, status, output, reason, created_at, accept_deadline,
                                 deadline, accepted_at, ended_at, task_id, target_seq, counted, short_timeout,
                                 requester_owner_id, owner_seq)
SELECT y.delegation_id, y.attempt, tg.agent_id, pg_temp.anon(y.ti, y.base_period, y.y0),
       pg_temp.anon(y.ri, y.base_period, y.y0), pg_temp.uuid7(y.y0 - interval '29 days', 'cap:' || y.ti),
       y.output_schema, y.status, y.output, y.reason, y.created_at, y.accept_deadline, y.deadline, y.accepted_at,
       y.ended_at, gen_random_uuid(),
       CASE WHEN y.ranked THEN row_number() OVER (PARTITION BY y.ti, y.ranked ORDER BY y.j) END,
       y.counted, y.short_timeout, CASE WHEN y.owned THEN y.ru END,
       CASE WHEN y.owned THEN row_number() OVER (PARTITION BY y.ti, y.owned ORDER BY y.j) END
  FROM (SELECT pg_temp.nid(c.base, c.j, a.delegation_id) AS delegation_id, a.attempt, c.j, c.ri, c.ru,
               pg_temp.target(c.fi, a.attempt, p.caps) AS ti, c.base_period, p.y0, a.output_schema, a.status,
               a.output, a.reason, a.created_at + c.shift AS created_at, a.accept_deadline + c.shift AS accept_deadline,
               a.deadline + c.shift AS deadline, a.accepted_at + c.shift AS accepted_at,
               a.ended_at + c.shift AS ended_at, a.target_seq IS NOT NULL AS ranked, a.counted, a.short_timeout,
               a.owner_seq IS NOT NULL AS owned
          FROM dcl c JOIN delegation_attempts a ON a.delegation_id = c.td, p) y
  JOIN hu tg ON tg.idx = y.ti;

-- Trust counters, as the transactions that ended those claims and attempts would have written
-- them: per agent and UTC day, and per target, requesting owner and day (at most
-- PARLEY_TRUST_PER_REQUESTER's default, 3, counted per owner and day).
INSERT INTO agent_trust_days (agent_id, day, claims_answered, claims_expired, claims_released, updated_at,
                              attempts_completed, attempts_unfinished, accepted_completed, accepted_unfinished)
SELECT agent_id, day, sum(ca), 0, 0, max(ts), sum(ac), sum(au), sum(acc), sum(acu)
  FROM (SELECT m.agent_id, (m.created_at AT TIME ZONE 'UTC')::date AS day, 1 AS ca, 0 AS ac, 0 AS au, 0 AS acc,
               0 AS acu, m.created_at AS ts
          FROM messages m
         WHERE m.played_by = 'personal' AND m.agent_id IS NOT NULL AND m.created_at < date_trunc('day', now())
        UNION ALL
        SELECT a.target_agent_id, (a.ended_at AT TIME ZONE 'UTC')::date, 0, (a.status = 'completed')::int,
               (a.status <> 'completed')::int, (a.accepted_at IS NOT NULL AND a.status = 'completed')::int,
               (a.accepted_at IS NOT NULL AND a.status <> 'completed')::int, a.ended_at
          FROM delegation_attempts a
         WHERE a.counted AND a.ended_at < date_trunc('day', now())) x
 GROUP BY agent_id, day;

INSERT INTO trust_requester_days (target_agent_id, requester_owner_id, day, counted)
SELECT a.target_agent_id, g.owner_user_id, (a.ended_at AT TIME ZONE 'UTC')::date, least(count(*), 3)
  FROM delegation_attempts a
  JOIN delegations d ON d.delegation_id = a.delegation_id
  JOIN agents g ON g.agent_id = d.requester_agent_id
 WHERE a.counted AND a.ended_at < date_trunc('day', now())
 GROUP BY 1, 2, 3;

-- From here on with the service's triggers: the capabilities (a quarter of each of four kinds
-- of work, the template target's schemas) make their agents' trust records; the other agents
-- with counters in the last 90 days get theirs from the same function the daily roll calls.
SET LOCAL session_replication_role = origin;

INSERT INTO capabilities (capability_id, agent_id, task_type, input_schema, output_schema, estimated_latency_ms,
                          estimated_cost_usd, description, tags, inbound_rate_limit, outbound_rate_limit, created_at,
                          updated_at)
SELECT pg_temp.uuid7(p.y0 - interval '29 days', 'cap:' || h.idx), h.agent_id,
       (ARRAY['code-review', 'testing', 'documentation', 'analysis'])[1 + h.idx % 4],
       t.input_schema, t.output_schema, t.estimated_latency_ms, t.estimated_cost_usd, t.description, t.tags,
       t.inbound_rate_limit, t.outbound_rate_limit, p.y0 - interval '29 days', p.y0 - interval '29 days'
  FROM hu h, p,
       (SELECT * FROM capabilities WHERE task_type = 'code-review' ORDER BY capability_id LIMIT 1) t
 WHERE h.idx BETWEEN 7 AND 6 + p.caps;

SELECT parley_refresh_trust_records(ARRAY(
    SELECT DISTINCT t.agent_id FROM agent_trust_days t
     WHERE t.day > (now() AT TIME ZONE 'UTC')::date - 90
       AND NOT EXISTS (SELECT 1 FROM trust_records r WHERE r.agent_id = t.agent_id)
     ORDER BY t.agent_id));

COMMIT;
