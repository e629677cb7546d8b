CREATE OR REPLACE FUNCTION parley_delegation_status_event() RETURNS trigger
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
