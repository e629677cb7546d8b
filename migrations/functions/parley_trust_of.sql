-- One agent's trust (`GET /api/trust/{agentId}`), by the definition of `parley_trust_scores`
-- without computing anyone else's: its components from its own counters (at most 90
-- `agent_trust_days` rows, the owners of its counted attempts), its percentile among the stored
-- records of the rest of the population (from `trust_score_counts`, the records per score: at
-- most 10 001 rows however large the population), itself included once whether it has a
-- record or not; and how many other agents that percentile compares it with (0 when it is alone,
-- and its percentile is then 100). The stored records are those of the population as of the last
-- daily roll (housekeeping recomputes the rows of an earlier day).
CREATE OR REPLACE FUNCTION parley_trust_of(p_agent uuid)
RETURNS TABLE (agent_id uuid, health numeric, delegation numeric, raw numeric, percentile integer,
               events bigint, total_delegations bigint, successful_delegations bigint,
               updated_at timestamptz, provisional boolean, others bigint)
LANGUAGE sql STABLE AS $$
    WITH today AS (
        SELECT (now() AT TIME ZONE 'UTC')::date AS d
    ), record AS (
        SELECT avg(parley_trust_day_share(t)) FILTER (WHERE t.day > today.d - 30) * 100 AS health,
               sum(t.attempts_completed + t.attempts_unfinished) AS finished,
               sum(t.attempts_completed) AS completed,
               sum(t.claims_answered + t.claims_expired + t.attempts_completed + t.attempts_unfinished) AS events,
               max(t.updated_at) AS updated_at
          FROM agent_trust_days t, today
         WHERE t.agent_id = p_agent AND t.day > today.d - 90
    ), components AS (
        SELECT coalesce(r.health, 50) AS health,
               CASE WHEN coalesce(r.finished, 0) > 0 THEN 100 * r.completed::numeric / r.finished ELSE 50 END AS delegation,
               coalesce(r.events, 0)::bigint AS events,
               coalesce(r.finished, 0)::bigint AS finished,
               coalesce(r.completed, 0)::bigint AS completed,
               r.updated_at
          FROM record r
    ), scored AS (
        SELECT c.*, round(0.6 * c.health + 0.4 * c.delegation, 2) AS raw FROM components c
    ), owners AS (
        SELECT count(DISTINCT q.requester_owner_id) AS n
          FROM trust_requester_days q, today
         WHERE q.target_agent_id = p_agent AND q.day > today.d - 90
    ), others AS (
        -- Every record but its own (the counts per score, then its own record taken off), and
        -- of those, the ones strictly below its score.
        SELECT (SELECT coalesce(sum(k.n), 0) FROM trust_score_counts k)
                 - (SELECT count(*) FROM trust_records x WHERE x.agent_id = p_agent) AS n,
               (SELECT coalesce(sum(k.n), 0) FROM trust_score_counts k WHERE k.raw < s.raw)
                 - (SELECT count(*) FROM trust_records x WHERE x.agent_id = p_agent AND x.raw < s.raw) AS lower
          FROM scored s
    )
    SELECT p_agent, round(s.health, 2), round(s.delegation, 2), s.raw,
           CASE WHEN o.n = 0 THEN 100 ELSE round(100.0 * o.lower / o.n)::integer END,
           s.events, s.finished, s.completed, s.updated_at, parley_trust_provisional(s.finished, w.n), o.n::bigint
      FROM scored s, others o, owners w
$$;
