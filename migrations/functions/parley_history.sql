-- The turns of a task in order, as `domain::Turn` reads them (with who played each and how it
-- was decided: an agent's turn by the agent; a system turn by the rules unless it says otherwise).
CREATE OR REPLACE FUNCTION parley_history(p_task uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'turnNumber', turn_number, 'side', side, 'action', action,
                   'reasoning', parts -> 0 -> 'data' -> 'assessment' -> 'reasoning',
                   'suggestedRoles', parts -> 0 -> 'data' -> 'assessment' -> 'suggestedRoles',
                   'message', parts -> 0 -> 'data' -> 'message',
                   'playedBy', CASE WHEN played_by = 'personal' THEN 'agent'
                                    WHEN fallback_reason IS NOT NULL THEN 'system_fallback'
                                    ELSE 'system' END,
                   'fallbackReason', fallback_reason,
                   'decidedBy', CASE WHEN played_by = 'personal' THEN 'agent' ELSE coalesce(decided_by, 'rules') END)
                   ORDER BY turn_number), '[]'::jsonb)
            FROM messages WHERE task_id = p_task);
END
$$;
