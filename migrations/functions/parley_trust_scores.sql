-- Every agent's trust, fresh from its counters (`GET /api/trust/{agentId}` reads one), ranked among the
-- population (agents with a capability or a record in the last 90 days, and the agent asked
-- about):
--   health     = mean over the last 30 days with activity of the day's share, times 100, of the
--                claims it answered before they expired and the attempts it accepted that it
--                completed in time; 50 with none
--   delegation = 100 * completed / finished attempts addressed to it in the last 90 days; 50
--                with none
--   raw        = 0.6 * health + 0.4 * delegation, 2 decimals
--   percentile = round(100 * agents with a strictly lower raw / (N - 1)); 100 when N <= 1
--   events     = claims answered or expired and attempts finished in the last 90 days
--   provisional: see `parley_trust_provisional`
-- Only attempts that counted are in the counters (see `parley_delegation_move`).
CREATE OR REPLACE FUNCTION parley_trust_scores(p_agent uuid)
RETURNS TABLE (agent_id uuid, health numeric, delegation numeric, raw numeric, percentile integer,
               events bigint, total_delegations bigint, successful_delegations bigint,
               updated_at timestamptz, provisional boolean)
LANGUAGE sql STABLE AS $$
    WITH today AS (
        SELECT (now() AT TIME ZONE 'UTC')::date AS d
    ), population AS (
        SELECT c.agent_id FROM capabilities c
        UNION
        SELECT t.agent_id FROM agent_trust_days t, today WHERE t.day > today.d - 90
        UNION
        SELECT a.agent_id FROM agents a WHERE a.agent_id = p_agent
    ), record AS (
        SELECT t.agent_id,
               avg(parley_trust_day_share(t)) FILTER (WHERE t.day > today.d - 30) * 100 AS health,
               sum(t.attempts_completed + t.attempts_unfinished) AS finished,
               sum(t.attempts_completed) AS completed,
               sum(t.claims_answered + t.claims_expired + t.attempts_completed + t.attempts_unfinished) AS events,
               max(t.updated_at) AS updated_at
          FROM agent_trust_days t, today
         WHERE t.day > today.d - 90
         GROUP BY t.agent_id
    ), components AS (
        SELECT p.agent_id,
               coalesce(r.health, 50) AS health,
               CASE WHEN coalesce(r.finished, 0) > 0 THEN 100 * r.completed::numeric / r.finished ELSE 50 END AS delegation,
               coalesce(r.events, 0)::bigint AS events,
               coalesce(r.finished, 0)::bigint AS finished,
               coalesce(r.completed, 0)::bigint AS completed,
               r.updated_at
          FROM population p LEFT JOIN record r ON r.agent_id = p.agent_id
    ), scored AS (
        SELECT c.*, round(0.6 * c.health + 0.4 * c.delegation, 2) AS raw FROM components c
    ), owners AS (
        SELECT q.target_agent_id AS agent_id, count(DISTINCT q.requester_owner_id) AS n
          FROM trust_requester_days q, today
         WHERE q.day > today.d - 90
         GROUP BY q.target_agent_id
    )
    SELECT s.agent_id, round(s.health, 2), round(s.delegation, 2), s.raw,
           CASE WHEN count(*) OVER () <= 1 THEN 100
                ELSE round(100.0 * (rank() OVER (ORDER BY s.raw) - 1) / (count(*) OVER () - 1))::integer END,
           s.events, s.finished, s.completed, s.updated_at, parley_trust_provisional(s.finished, o.n)
      FROM scored s LEFT JOIN owners o ON o.agent_id = s.agent_id
$$;
