-- Stores turns as their messages, and a `negotiation.turn` event for each (the action and who
-- played it, never scores), in one statement. A turn number stored twice fails on messages_task_turn_key.
-- `p_turns`: [{messageId, turnNumber, side, userId, action, parts, playedBy, fallbackReason?,
--              decidedBy?, agentId?, claimGeneration?, requestHash? (hex), response?}], in turn order.
CREATE OR REPLACE FUNCTION parley_store_turns(
    p_task uuid, p_opportunity uuid, p_source_user text, p_candidate_user text, p_turns jsonb
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH t AS (
        SELECT * FROM jsonb_to_recordset(p_turns) AS x(
            "messageId" uuid, "turnNumber" integer, side text, "userId" text, action text, parts jsonb,
            "playedBy" text, "fallbackReason" text, "decidedBy" text, "agentId" uuid, "claimGeneration" bigint,
            "requestHash" text, response jsonb)
    ), stored AS (
        INSERT INTO messages (message_id, task_id, turn_number, side, sender_id, action, parts, played_by,
                              fallback_reason, decided_by, agent_id, claim_generation, request_hash, response)
        SELECT "messageId", p_task, "turnNumber", side, 'agent:' || "userId", action, parts, "playedBy",
               "fallbackReason", "decidedBy", "agentId", "claimGeneration", decode("requestHash", 'hex'), response
          FROM t
    )
    INSERT INTO events (kind, opportunity_id, source_user_id, candidate_user_id, data)
    SELECT 'negotiation.turn', p_opportunity, p_source_user, p_candidate_user,
           jsonb_build_object('negotiationId', p_task, 'opportunityId', p_opportunity,
                              'turnNumber', "turnNumber", 'action', action,
                              'playedBy', CASE WHEN "playedBy" = 'personal' THEN 'agent'
                                               WHEN "fallbackReason" IS NOT NULL THEN 'system_fallback'
                                               ELSE 'system' END)
      FROM t ORDER BY "turnNumber";
END
$$;
