-- Back to trust without the delegation record, and events of opportunities only.
DROP TRIGGER delegation_attempts_status_event ON delegation_attempts;
DROP TRIGGER delegation_attempts_offered_event ON delegation_attempts;
DROP FUNCTION parley_delegation_status_event();
DELETE FROM events WHERE kind = 'delegation.status';
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check
    CHECK (kind IN ('opportunity.status', 'negotiation.turn', 'negotiation.outcome', 'negotiation.round'));
ALTER TABLE events ALTER COLUMN opportunity_id SET NOT NULL;

COMMENT ON COLUMN trust_records.events IS NULL;

DROP FUNCTION parley_trust_scores(uuid);
CREATE FUNCTION parley_trust_scores(p_agent uuid)
RETURNS TABLE (agent_id uuid, health numeric, delegation numeric, raw numeric, percentile integer,
               events bigint, updated_at timestamptz)
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
               avg(t.claims_answered::numeric / (t.claims_answered + t.claims_expired))
                   FILTER (WHERE t.day > today.d - 30 AND t.claims_answered + t.claims_expired > 0) * 100 AS health,
               sum(t.claims_answered + t.claims_expired) AS events,
               max(t.updated_at) AS updated_at
          FROM agent_trust_days t, today
         WHERE t.day > today.d - 90
         GROUP BY t.agent_id
    ), scored AS (
        SELECT p.agent_id,
               coalesce(r.health, 50) AS health,
               50::numeric AS delegation,
               round(0.6 * coalesce(r.health, 50) + 0.4 * 50, 2) AS raw,
               coalesce(r.events, 0)::bigint AS events,
               r.updated_at
          FROM population p LEFT JOIN record r ON r.agent_id = p.agent_id
    )
    SELECT s.agent_id, round(s.health, 2), s.delegation, s.raw,
           CASE WHEN count(*) OVER () <= 1 THEN 100
                ELSE round(100.0 * (rank() OVER (ORDER BY s.raw) - 1) / (count(*) OVER () - 1))::integer END,
           s.events, s.updated_at
      FROM scored s
$$;

CREATE OR REPLACE FUNCTION parley_refresh_trust_records(p_agents uuid[]) RETURNS void
LANGUAGE sql AS $$
    WITH today AS (
        SELECT (now() AT TIME ZONE 'UTC')::date AS d
    ), asked AS (
        SELECT DISTINCT a AS agent_id FROM unnest(p_agents) a
    ), record AS (
        SELECT g.agent_id,
               avg(t.claims_answered::numeric / (t.claims_answered + t.claims_expired))
                   FILTER (WHERE t.day > today.d - 30 AND t.claims_answered + t.claims_expired > 0) * 100 AS health,
               coalesce(sum(t.claims_answered + t.claims_expired), 0)::bigint AS events,
               max(t.updated_at) AS updated_at,
               count(t.agent_id) AS days
          FROM asked g CROSS JOIN today
          LEFT JOIN agent_trust_days t ON t.agent_id = g.agent_id AND t.day > today.d - 90
         GROUP BY g.agent_id
    ), kept AS (
        SELECT r.* FROM record r
         WHERE r.days > 0 OR EXISTS (SELECT 1 FROM capabilities c WHERE c.agent_id = r.agent_id)
    ), dropped AS (
        DELETE FROM trust_records x
         WHERE x.agent_id IN (SELECT agent_id FROM asked) AND x.agent_id NOT IN (SELECT agent_id FROM kept)
    )
    INSERT INTO trust_records AS x (agent_id, health, raw, events, updated_at, as_of)
    SELECT k.agent_id, coalesce(k.health, 50), round(0.6 * coalesce(k.health, 50) + 0.4 * 50, 2), k.events,
           k.updated_at, today.d
      FROM kept k, today
     ORDER BY k.agent_id
    ON CONFLICT (agent_id) DO UPDATE
       SET health = EXCLUDED.health, raw = EXCLUDED.raw, events = EXCLUDED.events,
           updated_at = EXCLUDED.updated_at, as_of = EXCLUDED.as_of
$$;

SELECT parley_refresh_trust_records(ARRAY(SELECT agent_id FROM trust_records ORDER BY agent_id));
