DROP TRIGGER IF EXISTS events_outbox ON events;
DROP FUNCTION IF EXISTS parley_outbox_fan_out();
DROP TABLE outbox_deliveries;
DROP TABLE outbox_targets;
