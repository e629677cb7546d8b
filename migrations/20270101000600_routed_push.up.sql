-- A2A push notifications for routed tasks: a requester's push configuration on a task a plain
-- message started at another agent is Parley's, not the target's (the target need not speak push
-- at all). Parley writes an `a2a.task` event whenever a routed task that has configurations is
-- seen in a new state (in a send's answer, a read, a cancel, a streamed event), and the outbox
-- delivers it to them as it delivers every event.

-- The state last told to the task's push configurations (NULL: none told yet).
ALTER TABLE a2a_routes ADD COLUMN pushed_state TEXT;

-- A push configuration follows a delegation or a routed task (the requester and the target's
-- task id, as `a2a_routes` keys them), never both.
ALTER TABLE outbox_targets ADD COLUMN route_requester_id UUID, ADD COLUMN route_task_id TEXT;
ALTER TABLE outbox_targets ADD CONSTRAINT outbox_targets_route_fkey
    FOREIGN KEY (route_requester_id, route_task_id) REFERENCES a2a_routes (requester_agent_id, task_id)
    ON DELETE CASCADE;
ALTER TABLE outbox_targets DROP CONSTRAINT outbox_targets_push_check;
ALTER TABLE outbox_targets ADD CONSTRAINT outbox_targets_push_check CHECK (
    (kind = 'a2a_push') = (config_id IS NOT NULL AND a2a_version IS NOT NULL
        AND ((delegation_id IS NOT NULL AND request_id IS NOT NULL AND route_task_id IS NULL)
             OR (delegation_id IS NULL AND request_id IS NULL AND route_requester_id IS NOT NULL
                 AND route_task_id IS NOT NULL)))) NOT VALID;
ALTER TABLE outbox_targets ADD CONSTRAINT outbox_targets_route_config_key
    UNIQUE (route_requester_id, route_task_id, config_id);

-- The event a routed task's new state is told by (to the requester's person only).
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check
    CHECK (kind IN ('opportunity.status', 'negotiation.turn', 'negotiation.outcome', 'negotiation.round',
                    'delegation.status', 'negotiation.question', 'a2a.task')) NOT VALID;
