-- Recomputes the stored trust rows of `p_agents` from their own counters, by the definition of
-- `parley_trust_scores` (in agent order, so concurrent writers lock rows in one sequence):
-- upserts the members of the population (a capability, or a record in the last 90 days) and
-- deletes the rest. Called for a first or last capability and by the daily roll; the counters'
-- own trigger (`parley_trust_day_counted`) does the same for one agent, cheaper.
CREATE OR REPLACE FUNCTION parley_refresh_trust_records(p_agents uuid[]) RETURNS void
LANGUAGE sql AS $$
    WITH today AS (
        SELECT (now() AT TIME ZONE 'UTC')::date AS d
    ), asked AS (
        SELECT DISTINCT a AS agent_id FROM unnest(p_agents) a
    ), record AS (
        SELECT g.agent_id,
               avg(parley_trust_day_share(t)) FILTER (WHERE t.day > today.d - 30) * 100 AS health,
               coalesce(sum(t.attempts_completed + t.attempts_unfinished), 0) AS finished,
               coalesce(sum(t.attempts_completed), 0) AS completed,
               coalesce(sum(t.claims_answered + t.claims_expired + t.attempts_completed + t.attempts_unfinished), 0)::bigint AS events,
               max(t.updated_at) AS updated_at,
               count(t.agent_id) AS days
          FROM asked g CROSS JOIN today
          LEFT JOIN agent_trust_days t ON t.agent_id = g.agent_id AND t.day > today.d - 90
         GROUP BY g.agent_id
    ), owners AS (
        SELECT q.target_agent_id AS agent_id, count(DISTINCT q.requester_owner_id) AS n
          FROM trust_requester_days q, today
         WHERE q.target_agent_id IN (SELECT agent_id FROM asked) AND q.day > today.d - 90
         GROUP BY q.target_agent_id
    ), kept AS (
        SELECT r.agent_id, coalesce(r.health, 50) AS health,
               CASE WHEN r.finished > 0 THEN 100 * r.completed::numeric / r.finished ELSE 50 END AS delegation,
               r.events, r.updated_at, parley_trust_provisional(r.finished, o.n) AS provisional
          FROM record r LEFT JOIN owners o ON o.agent_id = r.agent_id
         WHERE r.days > 0 OR EXISTS (SELECT 1 FROM capabilities c WHERE c.agent_id = r.agent_id)
    ), dropped AS (
        DELETE FROM trust_records x
         WHERE x.agent_id IN (SELECT agent_id FROM asked) AND x.agent_id NOT IN (SELECT agent_id FROM kept)
    )
    INSERT INTO trust_records AS x (agent_id, health, raw, events, updated_at, as_of, provisional)
    SELECT k.agent_id, k.health, round(0.6 * k.health + 0.4 * k.delegation, 2), k.events, k.updated_at, today.d,
           k.provisional
      FROM kept k, today
     ORDER BY k.agent_id
    ON CONFLICT (agent_id) DO UPDATE
       SET health = EXCLUDED.health, raw = EXCLUDED.raw, events = EXCLUDED.events,
           updated_at = EXCLUDED.updated_at, as_of = EXCLUDED.as_of, provisional = EXCLUDED.provisional
$$;
