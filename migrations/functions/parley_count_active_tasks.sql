-- Keeps the hub's queue depth (`task_counts`: the tasks not yet terminal) exact: a task that
-- enters or leaves the non-terminal states moves the count of one of 16 shards (picked by the
-- backend, so concurrent transactions rarely touch the same row), in the transaction that moves
-- the task.
CREATE OR REPLACE FUNCTION parley_count_active_tasks() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    delta integer := 0;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.state IN ('submitted', 'working', 'waiting_for_agent', 'claimed', 'waiting_for_person') THEN
        delta := delta + 1;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.state IN ('submitted', 'working', 'waiting_for_agent', 'claimed', 'waiting_for_person') THEN
        delta := delta - 1;
    END IF;
    IF delta <> 0 THEN
        UPDATE task_counts SET active = active + delta WHERE shard = pg_backend_pid() % 16;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS tasks_count_delete ON tasks;
CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION parley_count_active_tasks();

DROP TRIGGER IF EXISTS tasks_count_insert ON tasks;
CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks
    FOR EACH ROW EXECUTE FUNCTION parley_count_active_tasks();

DROP TRIGGER IF EXISTS tasks_count_update ON tasks;
CREATE TRIGGER tasks_count_update AFTER UPDATE OF state ON tasks
    FOR EACH ROW WHEN ((OLD.state IN ('submitted', 'working', 'waiting_for_agent', 'claimed', 'waiting_for_person'))
                       <> (NEW.state IN ('submitted', 'working', 'waiting_for_agent', 'claimed', 'waiting_for_person')))
    EXECUTE FUNCTION parley_count_active_tasks();
