-- Trust reads the delegation record (the attempts addressed to an agent), and the event log
-- carries delegation status changes.
--   health     = mean over the last 30 days with activity of the day's share, times 100, of the
--                claims it answered before they expired and the attempts it accepted that it
--                completed in time; 50 with none
--   delegation = 100 * completed / finished attempts addressed to it in the last 90 days; 50
--                with none
--   raw        = 0.6 * health + 0.4 * delegation, 2 decimals
--   percentile = round(100 * agents with a strictly lower raw / (N - 1)); 100 when N <= 1
--   events     = claims answered or expired and attempts finished in the last 90 days

DROP FUNCTION parley_trust_scores(uuid);
CREATE FUNCTION parley_trust_scores(p_agent uuid)
RETURNS TABLE (agent_id uuid, health numeric, delegation numeric, raw numeric, percentile integer,
               events bigint, total_delegations bigint, successful_delegations bigint,
               updated_at timestamptz)
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
               avg((t.claims_answered + t.accepted_completed)::numeric
                   / (t.claims_answered + t.claims_expired + t.accepted_completed + t.accepted_unfinished))
                   FILTER (WHERE t.day > today.d - 30
                             AND t.claims_answered + t.claims_expired + t.accepted_completed + t.accepted_unfinished > 0)
                   * 100 AS health,
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
    )
    SELECT s.agent_id, round(s.health, 2), round(s.delegation, 2), s.raw,
           CASE WHEN count(*) OVER () <= 1 THEN 100
                ELSE round(100.0 * (rank() OVER (ORDER BY s.raw) - 1) / (count(*) OVER () - 1))::integer END,
           s.events, s.finished, s.completed, s.updated_at
      FROM scored s
$$;

-- The stored rows follow the same definition (same signature: the triggers keep calling it).
CREATE OR REPLACE FUNCTION parley_refresh_trust_records(p_agents uuid[]) RETURNS void
LANGUAGE sql AS $$
    WITH today AS (
        SELECT (now() AT TIME ZONE 'UTC')::date AS d
    ), asked AS (
        SELECT DISTINCT a AS agent_id FROM unnest(p_agents) a
    ), record AS (
        SELECT g.agent_id,
               avg((t.claims_answered + t.accepted_completed)::numeric
                   / (t.claims_answered + t.claims_expired + t.accepted_completed + t.accepted_unfinished))
                   FILTER (WHERE t.day > today.d - 30
                             AND t.claims_answered + t.claims_expired + t.accepted_completed + t.accepted_unfinished > 0)
                   * 100 AS health,
               coalesce(sum(t.attempts_completed + t.attempts_unfinished), 0) AS finished,
               coalesce(sum(t.attempts_completed), 0) AS completed,
               coalesce(sum(t.claims_answered + t.claims_expired + t.attempts_completed + t.attempts_unfinished), 0)::bigint AS events,
               max(t.updated_at) AS updated_at,
               count(t.agent_id) AS days
          FROM asked g CROSS JOIN today
          LEFT JOIN agent_trust_days t ON t.agent_id = g.agent_id AND t.day > today.d - 90
         GROUP BY g.agent_id
    ), kept AS (
        SELECT r.agent_id, coalesce(r.health, 50) AS health,
               CASE WHEN r.finished > 0 THEN 100 * r.completed::numeric / r.finished ELSE 50 END AS delegation,
               r.events, r.updated_at
          FROM record r
         WHERE r.days > 0 OR EXISTS (SELECT 1 FROM capabilities c WHERE c.agent_id = r.agent_id)
    ), dropped AS (
        DELETE FROM trust_records x
         WHERE x.agent_id IN (SELECT agent_id FROM asked) AND x.agent_id NOT IN (SELECT agent_id FROM kept)
    )
    INSERT INTO trust_records AS x (agent_id, health, raw, events, updated_at, as_of)
    SELECT k.agent_id, k.health, round(0.6 * k.health + 0.4 * k.delegation, 2), k.events, k.updated_at, today.d
      FROM kept k, today
     ORDER BY k.agent_id
    ON CONFLICT (agent_id) DO UPDATE
       SET health = EXCLUDED.health, raw = EXCLUDED.raw, events = EXCLUDED.events,
           updated_at = EXCLUDED.updated_at, as_of = EXCLUDED.as_of
$$;

COMMENT ON COLUMN trust_records.events IS 'Claims answered or expired and attempts finished in the last 90 days.';

SELECT parley_refresh_trust_records(ARRAY(SELECT agent_id FROM trust_records ORDER BY agent_id));

-- Delegation status changes go to both owners; they belong to no opportunity.
ALTER TABLE events ALTER COLUMN opportunity_id DROP NOT NULL;
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check
    CHECK (kind IN ('opportunity.status', 'negotiation.turn', 'negotiation.outcome', 'negotiation.round',
                    'delegation.status'));

-- Every status an attempt takes (offered as `request`, then each move) is a `delegation.status`
-- event for both owners, written by the statement that makes the change, so in its
-- transaction. Each side appears in it only by anonymous id.
CREATE FUNCTION parley_delegation_status_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events (kind, opportunity_id, source_user_id, candidate_user_id, data)
    SELECT 'delegation.status', NULL, r.owner_user_id, t.owner_user_id,
           jsonb_build_object('requestId', d.request_id, 'attempt', NEW.attempt, 'status', NEW.status,
                              'taskType', d.task_type,
                              'requesterAnonymousId', NEW.requester_anonymous_id,
                              'targetAnonymousId', NEW.target_anonymous_id)
      FROM delegations d
      JOIN agents r ON r.agent_id = d.requester_agent_id
      JOIN agents t ON t.agent_id = NEW.target_agent_id
     WHERE d.delegation_id = NEW.delegation_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER delegation_attempts_offered_event AFTER INSERT ON delegation_attempts
    FOR EACH ROW EXECUTE FUNCTION parley_delegation_status_event();
CREATE TRIGGER delegation_attempts_status_event AFTER UPDATE OF status ON delegation_attempts
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION parley_delegation_status_event();
