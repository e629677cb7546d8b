-- The outbox's fan-out: an event just written (in the transaction of the change it describes)
-- becomes one delivery row per target that wants it, in the same transaction, and the job that
-- sends them is armed (`parley_jobs.arm_outbox_event`) when there is at least one. So an event
-- reaches its targets if and only if its change commits, and a crash at any moment after the
-- commit leaves the rows and the job to send them.
--
-- Who wants an event: an enabled webhook of the platform (no owner) or of one of the two people
-- the event concerns (the SSE stream's scope), subscribed to its kind; and, for a
-- `delegation.status` event, every enabled A2A push configuration of that delegation (by its
-- request id); for an `a2a.task` event, every enabled A2A push configuration of that routed task
-- (by its requester and task id). Nothing here names an event kind otherwise, so a new kind needs
-- no change here.
CREATE OR REPLACE FUNCTION parley_outbox_fan_out() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    fanned integer := 0;
    n integer;
BEGIN
    INSERT INTO outbox_deliveries (target_id, event_id)
    SELECT t.target_id, NEW.event_id FROM outbox_targets t
     WHERE t.kind = 'webhook' AND t.status = 'enabled' AND NEW.kind = ANY (t.event_types)
       AND (t.owner_user_id IS NULL OR t.owner_user_id = NEW.source_user_id
            OR t.owner_user_id = NEW.candidate_user_id);
    GET DIAGNOSTICS fanned = ROW_COUNT;
    IF NEW.kind = 'delegation.status' AND NEW.data ? 'requestId' THEN
        INSERT INTO outbox_deliveries (target_id, event_id)
        SELECT t.target_id, NEW.event_id FROM outbox_targets t
         WHERE t.kind = 'a2a_push' AND t.request_id = (NEW.data->>'requestId')::uuid AND t.status = 'enabled';
        GET DIAGNOSTICS n = ROW_COUNT;
        fanned := fanned + n;
    ELSIF NEW.kind = 'a2a.task' AND NEW.data ? 'requesterAgentId' THEN
        INSERT INTO outbox_deliveries (target_id, event_id)
        SELECT t.target_id, NEW.event_id FROM outbox_targets t
         WHERE t.route_requester_id = (NEW.data->>'requesterAgentId')::uuid
           AND t.route_task_id = NEW.data->>'taskId' AND t.kind = 'a2a_push' AND t.status = 'enabled';
        GET DIAGNOSTICS n = ROW_COUNT;
        fanned := fanned + n;
    END IF;
    IF fanned > 0 THEN
        PERFORM parley_jobs.arm_outbox_event(NEW.event_id);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS events_outbox ON events;
CREATE TRIGGER events_outbox AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION parley_outbox_fan_out();
