-- A new delegation with its first attempt: the row (the `p_seq`-th of its requester, in
-- `request`), then `parley_delegation_offer` for attempt 1. Answers whether that attempt is
-- live (false: its target's inbound window had no room for it, and the caller looks for the
-- next one) and
-- the delegation's record as `parley_delegation_record` makes it.
CREATE OR REPLACE FUNCTION parley_delegation_make(
    p_delegation uuid, p_request uuid, p_requester uuid, p_task_type text, p_custom_type text, p_input jsonb,
    p_requested_target uuid, p_timeout_ms bigint, p_fallback_enabled boolean, p_max_retries integer,
    p_created_at timestamptz, p_seq bigint,
    p_task uuid, p_target uuid, p_target_anonymous uuid, p_requester_anonymous uuid, p_capability uuid,
    p_output_schema jsonb, p_accept_deadline timestamptz, p_deadline timestamptz, p_timer_id text,
    p_inbound_limit integer
) RETURNS TABLE (live boolean, delegation_record jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO delegations (delegation_id, request_id, requester_agent_id, task_type, custom_type, input,
                             requested_target, timeout_ms, fallback_enabled, max_retries, retries_used, status,
                             created_at, updated_at, requester_seq)
    VALUES (p_delegation, p_request, p_requester, p_task_type, p_custom_type, p_input, p_requested_target,
            p_timeout_ms, p_fallback_enabled, p_max_retries, 0, 'request', p_created_at, p_created_at, p_seq);
    live := parley_delegation_offer(p_delegation, 1, p_task, p_target, p_target_anonymous, p_requester_anonymous,
                                    p_capability, p_output_schema, p_created_at, p_accept_deadline, p_deadline,
                                    p_timer_id, p_inbound_limit);
    delegation_record := parley_delegation_record(p_delegation);
    RETURN NEXT;
END
$$;
