DELETE FROM outbox_targets WHERE route_task_id IS NOT NULL;
DELETE FROM events WHERE kind = 'a2a.task';
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check
    CHECK (kind IN ('opportunity.status', 'negotiation.turn', 'negotiation.outcome', 'negotiation.round',
                    'delegation.status', 'negotiation.question')) NOT VALID;
ALTER TABLE outbox_targets DROP CONSTRAINT outbox_targets_route_config_key;
ALTER TABLE outbox_targets DROP CONSTRAINT outbox_targets_push_check;
ALTER TABLE outbox_targets ADD CONSTRAINT outbox_targets_push_check CHECK (
    (kind = 'a2a_push') = (delegation_id IS NOT NULL AND request_id IS NOT NULL AND config_id IS NOT NULL
                           AND a2a_version IS NOT NULL)) NOT VALID;
ALTER TABLE outbox_targets DROP CONSTRAINT outbox_targets_route_fkey;
ALTER TABLE outbox_targets DROP COLUMN route_requester_id, DROP COLUMN route_task_id;
ALTER TABLE a2a_routes DROP COLUMN pushed_state;
