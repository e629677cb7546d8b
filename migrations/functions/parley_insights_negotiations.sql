-- Counts the endings of these negotiations into the insights rollups (`insight_days` and
-- `insight_counts`): once for everyone (scope '') and once for each side's user, on the UTC day
-- the negotiation ended. Called in the transaction that ends a negotiation, and by the
-- backfill for history from before the rollups; a negotiation without an outcome (a failed
-- task) counts for nothing. Returns how many negotiations it counted.
--
-- What counts, per scope (a user sees only their own side's turns):
-- - the outcome (accepted, rejected, or stalled by turn_cap, timeout or canceled), the turn
--   count, and the time from start to outcome (bucketed);
-- - each turn a personal agent answered, with its wait: the stored time of the answer minus
--   that of the turn before it (or the negotiation's start, for turn 0), bucketed;
-- - each turn the system negotiator played on a personal agent's seat (a fallback), and each it
--   played for a user without a personal agent (a system turn);
-- - each term named missing (`missing: a, b` up to a `;`, a line's end or a sentence's end;
--   `none` and `(+N more)` dropped) in the reasoning of counter and reject turns: the first ten
--   terms a turn names (as many as the system negotiator ever lists), each of at most 64
--   characters (a longer one is not counted), so that one turn adds at most ten keys per scope
--   however many it names: a personal agent's reasoning is its own to write.
--
-- The backfill counts into shard 0 (`into_shard`), the rows that hold a finished day. Every row
-- a live ending touches is in the shard of its negotiation, and the rows are upserted in
-- key order, the everyone row first: two endings in the same shard queue on that row and never
-- hold each other's rows.
CREATE OR REPLACE FUNCTION parley_insights_negotiations(ids uuid[], into_shard smallint DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    counted integer;
BEGIN
    SELECT count(*) INTO counted FROM parley_insights_seats(ids, into_shard) WHERE own_side IS NULL;
    IF counted = 0 THEN
        RETURN 0;
    END IF;

    WITH seats AS (
        SELECT * FROM parley_insights_seats(ids, into_shard)
    ), ended AS (
        SELECT * FROM seats WHERE own_side IS NULL
    ), turns AS (
        SELECT m.task_id, m.side,
               count(*) FILTER (WHERE m.played_by = 'personal') AS answered,
               count(*) FILTER (WHERE m.played_by = 'system'
                                  AND (CASE m.side WHEN 'source' THEN e.source_kind ELSE e.candidate_kind END) = 'personal')
                   AS fallbacks,
               count(*) FILTER (WHERE m.played_by = 'system'
                                  AND (CASE m.side WHEN 'source' THEN e.source_kind ELSE e.candidate_kind END) = 'system')
                   AS system_turns
          FROM ended e
          JOIN messages m ON m.task_id = e.task_id
         GROUP BY m.task_id, m.side
    ), waits AS (
        SELECT w.task_id, w.side, sum(w.wait) AS answer_seconds
          FROM (SELECT m.task_id, m.side, m.played_by,
                       extract(epoch FROM m.created_at - coalesce(
                           lag(m.created_at) OVER (PARTITION BY m.task_id ORDER BY m.turn_number),
                           e.created_at))::float8 AS wait
                  FROM ended e JOIN messages m ON m.task_id = e.task_id) w
         WHERE w.played_by = 'personal'
         GROUP BY w.task_id, w.side
    ), per_seat AS (
        SELECT s.scope, s.day, s.shard, s.task_id, s.own_side, s.accepted, s.reason, s.turn_count,
               coalesce(sum(t.answered), 0) AS answered,
               coalesce(sum(w.answer_seconds), 0) AS answer_seconds,
               coalesce(sum(t.fallbacks), 0) AS fallbacks,
               coalesce(sum(t.system_turns), 0) AS system_turns
          FROM seats s
          LEFT JOIN turns t ON t.task_id = s.task_id AND (s.own_side IS NULL OR t.side = s.own_side)
          LEFT JOIN waits w ON w.task_id = t.task_id AND w.side = t.side
         GROUP BY s.scope, s.day, s.shard, s.task_id, s.own_side, s.accepted, s.reason, s.turn_count
    )
    INSERT INTO insight_days AS d
           (scope, day, shard, negotiations, accepted, rejected, turn_cap, timeout, canceled, turns,
            answered, answer_seconds, fallbacks, system_turns)
    SELECT scope, day, shard,
           count(*),
           count(*) FILTER (WHERE accepted),
           count(*) FILTER (WHERE NOT accepted AND reason IS NULL),
           count(*) FILTER (WHERE reason = 'turn_cap'),
           count(*) FILTER (WHERE reason = 'timeout'),
           count(*) FILTER (WHERE reason = 'canceled'),
           coalesce(sum(turn_count), 0),
           sum(answered), sum(answer_seconds), sum(fallbacks), sum(system_turns)
      FROM per_seat
     GROUP BY scope, day, shard
     ORDER BY scope, day, shard
    ON CONFLICT (scope, day, shard) DO UPDATE
       SET negotiations = d.negotiations + EXCLUDED.negotiations,
           accepted = d.accepted + EXCLUDED.accepted,
           rejected = d.rejected + EXCLUDED.rejected,
           turn_cap = d.turn_cap + EXCLUDED.turn_cap,
           timeout = d.timeout + EXCLUDED.timeout,
           canceled = d.canceled + EXCLUDED.canceled,
           turns = d.turns + EXCLUDED.turns,
           answered = d.answered + EXCLUDED.answered,
           answer_seconds = d.answer_seconds + EXCLUDED.answer_seconds,
           fallbacks = d.fallbacks + EXCLUDED.fallbacks,
           system_turns = d.system_turns + EXCLUDED.system_turns;

    WITH seats AS (
        SELECT * FROM parley_insights_seats(ids, into_shard)
    ), ended AS (
        SELECT * FROM seats WHERE own_side IS NULL
    ), turns AS (
        SELECT m.task_id, m.side, m.turn_number, m.action, m.played_by,
               m.parts -> 0 -> 'data' -> 'assessment' ->> 'reasoning' AS reasoning,
               extract(epoch FROM m.created_at - coalesce(
                   lag(m.created_at) OVER (PARTITION BY m.task_id ORDER BY m.turn_number),
                   e.created_at))::float8 AS wait
          FROM ended e JOIN messages m ON m.task_id = e.task_id
    ), named AS (
        SELECT x.task_id, x.side, x.turn_number, found.n, listed.i,
               lower(btrim(rtrim(btrim(listed.term), '.'))) AS term
          FROM turns x
         CROSS JOIN LATERAL regexp_matches(x.reasoning, 'missing: ((?:[^;.\n]|\.(?=\S))*)', 'g')
                   WITH ORDINALITY AS found(g, n)
         CROSS JOIN LATERAL unnest(string_to_array(
                   regexp_replace(found.g[1], '\s*\(\+\d+ more\)', '', 'g'), ','))
                   WITH ORDINALITY AS listed(term, i)
         WHERE x.action IN ('counter', 'reject')
    ), objections AS (
        SELECT task_id, side, term
          FROM (SELECT task_id, side, term,
                       row_number() OVER (PARTITION BY task_id, turn_number ORDER BY n, i) AS nth
                  FROM named
                 WHERE term <> '' AND term <> 'none') t
         WHERE nth <= 10 AND char_length(term) <= 64
    ), keyed AS (
        SELECT scope, day, shard, 'turns' AS kind, turn_count::text AS key FROM seats
        UNION ALL
        SELECT scope, day, shard, 'outcome',
               parley_insights_bucket(extract(epoch FROM completed_at - created_at)::float8)::text
          FROM seats
        UNION ALL
        SELECT s.scope, s.day, s.shard, 'answer', parley_insights_bucket(x.wait)::text
          FROM seats s JOIN turns x ON x.task_id = s.task_id AND (s.own_side IS NULL OR x.side = s.own_side)
         WHERE x.played_by = 'personal'
        UNION ALL
        SELECT s.scope, s.day, s.shard, 'objection', o.term
          FROM seats s JOIN objections o ON o.task_id = s.task_id AND (s.own_side IS NULL OR o.side = s.own_side)
    )
    INSERT INTO insight_counts AS c (scope, day, kind, key, shard, n)
    SELECT scope, day, kind, key, shard, count(*)
      FROM keyed
     GROUP BY scope, day, kind, key, shard
     ORDER BY scope, day, kind, key, shard
    ON CONFLICT (scope, day, kind, key, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
    RETURN counted;
END
$$;
