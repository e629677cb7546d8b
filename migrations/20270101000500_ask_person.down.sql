DROP INDEX tasks_source_active_idx;
DROP INDEX tasks_candidate_active_idx;
CREATE INDEX tasks_source_active_idx ON tasks (source_user_id, task_id DESC)
    WHERE state IN ('submitted', 'working', 'waiting_for_agent', 'claimed');
CREATE INDEX tasks_candidate_active_idx ON tasks (candidate_user_id, task_id DESC)
    WHERE state IN ('submitted', 'working', 'waiting_for_agent', 'claimed');
DELETE FROM insight_counts WHERE kind = 'question';
ALTER TABLE insight_counts DROP CONSTRAINT insight_counts_kind_check;
ALTER TABLE insight_counts ADD CONSTRAINT insight_counts_kind_check
    CHECK (kind IN ('turns', 'outcome', 'answer', 'objection')) NOT VALID;
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check
    CHECK (kind IN ('opportunity.status', 'negotiation.turn', 'negotiation.outcome', 'negotiation.round',
                    'delegation.status')) NOT VALID;
ALTER TABLE tasks DROP CONSTRAINT tasks_state_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_state_check
    CHECK (state IN ('submitted', 'working', 'waiting_for_agent', 'claimed', 'completed', 'canceled', 'failed'))
    NOT VALID;
DROP TABLE person_questions;
