-- A turn just parked for `p_user`: when one of the user's active agents that negotiates (its
-- `negotiation_mode` enabled) is an agent Parley calls (registered by its AgentCard: it never
-- polls), the job that claims the turn for it and sends
-- it over A2A is armed (`parley_jobs.arm_a2a_turn`), in the transaction of the park. Called by
-- `parley_parked` and by `parley_respond` when it parks the next turn.
CREATE OR REPLACE FUNCTION parley_a2a_turn_parked(p_task uuid, p_user text, p_turn integer) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM agents a JOIN agent_cards c ON c.agent_id = a.agent_id
                WHERE a.owner_user_id = p_user AND a.status = 'active' AND a.negotiation_mode = 'enabled') THEN
        PERFORM parley_jobs.arm_a2a_turn(p_task, p_turn);
    END IF;
END
$$;
