-- The seats an ending counts for, one row each, for `parley_insights_negotiations`: every ended
-- negotiation among `ids` that has its outcome, once for everyone (scope '', no own side) and
-- once for each side's user (scope the user, own side 'source' or 'candidate'), with its day,
-- its shard (`into_shard`, or its own), and what its outcome says.
CREATE OR REPLACE FUNCTION parley_insights_seats(ids uuid[], into_shard smallint)
RETURNS TABLE (task_id uuid, source_user_id text, candidate_user_id text, source_kind text, candidate_kind text,
               created_at timestamptz, completed_at timestamptz, day date, shard smallint, accepted boolean,
               reason text, turn_count integer, scope text, own_side text)
LANGUAGE sql STABLE AS $$
    WITH ended AS (
        SELECT t.task_id, t.source_user_id, t.candidate_user_id, t.source_kind, t.candidate_kind,
               t.created_at, t.completed_at,
               (t.completed_at AT TIME ZONE 'UTC')::date AS day,
               coalesce(into_shard, parley_insights_shard(t.task_id)) AS shard,
               (a.parts -> 0 -> 'data' ->> 'hasOpportunity')::boolean AS accepted,
               a.parts -> 0 -> 'data' ->> 'reason' AS reason,
               (a.parts -> 0 -> 'data' ->> 'turnCount')::int AS turn_count
          FROM tasks t
          JOIN artifacts a ON a.task_id = t.task_id AND a.name = 'negotiation-outcome'
         WHERE t.task_id = ANY(ids) AND t.completed_at IS NOT NULL
    )
    SELECT e.*, ''::text, NULL::text FROM ended e
    UNION ALL
    SELECT e.*, e.source_user_id, 'source' FROM ended e
    UNION ALL
    SELECT e.*, e.candidate_user_id, 'candidate' FROM ended e
$$;
