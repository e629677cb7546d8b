-- What discovery and ranking read on every request, kept ready by the transactions that change
-- it rather than recomputed per request:
-- - every agent with a capability has an anonymous id row (issued already expired when its first
--   capability arrives without one, so the next use replaces it with a real one), and the
--   expired current ids are found through a small index, so a discovery refreshes ids only when
--   some of the agents it may show have actually expired;
-- - `trust_records`: each agent's raw trust, kept by the writers of its daily counters and of
--   capabilities; the percentile is the rank among these rows, read with a join.

-- Anonymous ids --------------------------------------------------------------------------------

CREATE INDEX anonymous_ids_current_expiry_idx ON anonymous_ids (expires_at) WHERE current;

CREATE FUNCTION parley_issue_placeholder_ids() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO anonymous_ids (anonymous_id, agent_id, expires_at)
    SELECT gen_random_uuid(), n.agent_id, now()
      FROM (SELECT DISTINCT agent_id FROM new_capabilities ORDER BY agent_id) n
     WHERE NOT EXISTS (SELECT 1 FROM anonymous_ids x WHERE x.agent_id = n.agent_id AND x.current)
    ON CONFLICT (agent_id) WHERE current DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER capabilities_anonymous_ids AFTER INSERT ON capabilities
    REFERENCING NEW TABLE AS new_capabilities
    FOR EACH STATEMENT EXECUTE FUNCTION parley_issue_placeholder_ids();

-- Agents that already have capabilities but no id get one the same way.
INSERT INTO anonymous_ids (anonymous_id, agent_id, expires_at)
SELECT gen_random_uuid(), c.agent_id, now()
  FROM (SELECT DISTINCT agent_id FROM capabilities) c
 WHERE NOT EXISTS (SELECT 1 FROM anonymous_ids x WHERE x.agent_id = c.agent_id AND x.current);

-- Trust --------------------------------------------------------------------------------------

-- One row per agent of the trust population (a capability, or a record in the last 90 days),
-- with the numbers that depend on its own counters only, as of `as_of` (a UTC day: the 30- and
-- 90-day windows move at midnight, so a row of an earlier day is recomputed on the next read).
CREATE TABLE trust_records (
    agent_id    UUID PRIMARY KEY REFERENCES agents ON DELETE CASCADE,
    -- Unrounded; 50 with no activity in the last 30 days.
    health      NUMERIC NOT NULL,
    -- 0.6 * health + 0.4 * delegation, 2 decimals.
    raw         NUMERIC NOT NULL,
    -- Claims answered or expired in the last 90 days.
    events      BIGINT NOT NULL,
    updated_at  TIMESTAMPTZ,
    as_of       DATE NOT NULL
);
CREATE INDEX trust_records_as_of_idx ON trust_records (as_of);

-- Recomputes the rows of `p_agents` from their own counters (in agent order, so concurrent
-- writers lock rows in one sequence): upserts the members of the population, deletes the rest.
CREATE FUNCTION parley_refresh_trust_records(p_agents uuid[]) RETURNS void
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

-- The counters of an agent changed (the end of a claim, or any other write): its row follows, in
-- the same transaction.
CREATE FUNCTION parley_trust_days_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM parley_refresh_trust_records(ARRAY(SELECT DISTINCT agent_id FROM changed_days ORDER BY agent_id));
    RETURN NULL;
END
$$;
CREATE TRIGGER agent_trust_days_inserted AFTER INSERT ON agent_trust_days
    REFERENCING NEW TABLE AS changed_days
    FOR EACH STATEMENT EXECUTE FUNCTION parley_trust_days_changed();
CREATE TRIGGER agent_trust_days_updated AFTER UPDATE ON agent_trust_days
    REFERENCING NEW TABLE AS changed_days
    FOR EACH STATEMENT EXECUTE FUNCTION parley_trust_days_changed();

-- A first capability brings its agent into the population.
CREATE FUNCTION parley_trust_capabilities_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM parley_refresh_trust_records(ARRAY(
        SELECT DISTINCT n.agent_id FROM new_capabilities n
         WHERE NOT EXISTS (SELECT 1 FROM trust_records x WHERE x.agent_id = n.agent_id)
         ORDER BY n.agent_id));
    RETURN NULL;
END
$$;
CREATE TRIGGER capabilities_trust_added AFTER INSERT ON capabilities
    REFERENCING NEW TABLE AS new_capabilities
    FOR EACH STATEMENT EXECUTE FUNCTION parley_trust_capabilities_added();

-- Its last capability gone and no recent record, an agent leaves it (only deletes here: the
-- agent itself may be being deleted).
CREATE FUNCTION parley_trust_capabilities_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM trust_records x
     WHERE x.agent_id IN (SELECT agent_id FROM old_capabilities)
       AND NOT EXISTS (SELECT 1 FROM capabilities c WHERE c.agent_id = x.agent_id)
       AND NOT EXISTS (SELECT 1 FROM agent_trust_days t
                        WHERE t.agent_id = x.agent_id AND t.day > (now() AT TIME ZONE 'UTC')::date - 90);
    RETURN NULL;
END
$$;
CREATE TRIGGER capabilities_trust_removed AFTER DELETE ON capabilities
    REFERENCING OLD TABLE AS old_capabilities
    FOR EACH STATEMENT EXECUTE FUNCTION parley_trust_capabilities_removed();

-- Every member's percentile: round(100 * members with a strictly lower raw / (N - 1)); 100 when
-- N <= 1. A rank over the stored rows (no history is read).
CREATE VIEW trust_percentiles AS
SELECT agent_id, raw, events,
       CASE WHEN count(*) OVER () <= 1 THEN 100
            ELSE round(100.0 * (rank() OVER (ORDER BY raw) - 1) / (count(*) OVER () - 1))::integer END AS percentile
  FROM trust_records;

SELECT parley_refresh_trust_records(ARRAY(
    SELECT agent_id FROM capabilities
    UNION
    SELECT agent_id FROM agent_trust_days WHERE day > (now() AT TIME ZONE 'UTC')::date - 90
    ORDER BY 1));
