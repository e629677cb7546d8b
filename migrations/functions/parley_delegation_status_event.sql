-- Every status an attempt takes (offered as `request`, then each move) is a `delegation.status`
-- event for both owners, written by the statement that makes the change, so in its
-- transaction. Each side appears in it only by anonymous id; `taskId` names the attempt's A2A
-- task, so a client that sees a status change can read the attempt at `GET /api/tasks/{taskId}`.
CREATE OR REPLACE FUNCTION parley_delegation_status_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events (kind, opportunity_id, source_user_id, candidate_user_id, data)
    SELECT 'delegation.status', NULL, r.owner_user_id, t.owner_user_id,
           jsonb_build_object('requestId', d.request_id, 'attempt', NEW.attempt, 'status', NEW.status,
                              'taskId', NEW.task_id, 'taskType', d.task_type,
                              'requesterAnonymousId', NEW.requester_anonymous_id,
                              'targetAnonymousId', NEW.target_anonymous_id)
      FROM delegations d
      JOIN agents r ON r.agent_id = d.requester_agent_id
      JOIN agents t ON t.agent_id = NEW.target_agent_id
     WHERE d.delegation_id = NEW.delegation_id;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS delegation_attempts_offered_event ON delegation_attempts;
CREATE TRIGGER delegation_attempts_offered_event AFTER INSERT ON delegation_attempts
    FOR EACH ROW EXECUTE FUNCTION parley_delegation_status_event();

DROP TRIGGER IF EXISTS delegation_attempts_status_event ON delegation_attempts;
CREATE TRIGGER delegation_attempts_status_event AFTER UPDATE OF status ON delegation_attempts
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION parley_delegation_status_event();
