-- A person's lists read in the time of one page, however long their history.
--
-- A list of a user's negotiations or opportunities reads the newest rows where they are the
-- source, and those where they are the candidate, each from its own index in id order, then
-- merges the two (`UNION ALL`, each side limited to the page). Listing only the active ones
-- walked every finished row of a busy user to find them; these partial indexes hold only the
-- rows in an active state (a handful per user), by user and id:
--
-- - negotiations in progress (`submitted`, `working`, `waiting_for_agent`, `claimed`), as
--   source and as candidate, and those whose turn waits for the user (`waiting_for_agent`,
--   `claimed`, by `awaiting_user_id`);
-- - opportunities `negotiating` or `pending`, by user, status and id.
--
-- The lists name these states literally (`src/store/tasks.rs`, `src/store/opportunities.rs`),
-- so that a generic plan uses them as a custom one does.
CREATE INDEX tasks_source_active_idx ON tasks (source_user_id, task_id DESC)
    WHERE state IN ('submitted', 'working', 'waiting_for_agent', 'claimed');
CREATE INDEX tasks_candidate_active_idx ON tasks (candidate_user_id, task_id DESC)
    WHERE state IN ('submitted', 'working', 'waiting_for_agent', 'claimed');
CREATE INDEX tasks_awaiting_idx ON tasks (awaiting_user_id, task_id DESC)
    WHERE state IN ('waiting_for_agent', 'claimed');
CREATE INDEX opportunities_source_open_idx ON opportunities (source_user_id, status, opportunity_id DESC)
    WHERE status IN ('negotiating', 'pending');
CREATE INDEX opportunities_candidate_open_idx ON opportunities (candidate_user_id, status, opportunity_id DESC)
    WHERE status IN ('negotiating', 'pending');
