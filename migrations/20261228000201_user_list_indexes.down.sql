DROP INDEX opportunities_candidate_open_idx;
DROP INDEX opportunities_source_open_idx;
DROP INDEX tasks_awaiting_idx;
DROP INDEX tasks_candidate_active_idx;
DROP INDEX tasks_source_active_idx;
