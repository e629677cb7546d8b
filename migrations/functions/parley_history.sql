-- The turns of a task in order, as `domain::Turn` reads them.
CREATE OR REPLACE FUNCTION parley_history(p_task uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'turnNumber', turn_number, 'side', side, 'action', action,
                   'reasoning', parts -> 0 -> 'data' -> 'assessment' -> 'reasoning',
                   'suggestedRoles', parts -> 0 -> 'data' -> 'assessment' -> 'suggestedRoles',
                   'message', parts -> 0 -> 'data' -> 'message') ORDER BY turn_number), '[]'::jsonb)
            FROM messages WHERE task_id = p_task);
END
$$;
