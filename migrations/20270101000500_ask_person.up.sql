-- Asking the person: a personal agent that is unsure asks its person (`ask_person`) instead of
-- guessing, and the turn waits in `waiting_for_person` until the person answers on the status
-- page (or through the API) or the answer window (`PARLEY_ASK_TIMEOUT`) runs out.
--
-- One row per question, written in the transaction that releases the claim. The question and
-- the answer belong to the asking side: nothing of them is shown to the other side. At most one
-- question of a task is pending (`person_questions_one_pending_idx`); the agent's next pickup of
-- that turn reads the answered and unanswered ones of its turn (`person_questions_task_idx`).

CREATE TABLE person_questions (
    question_id       UUID PRIMARY KEY,
    task_id           UUID NOT NULL REFERENCES tasks ON DELETE CASCADE,
    -- The asking side and its person.
    side              TEXT NOT NULL CHECK (side IN ('source', 'candidate')),
    user_id           TEXT NOT NULL CHECK (length(user_id) BETWEEN 1 AND 256),
    agent_id          UUID,
    turn_number       INTEGER NOT NULL CHECK (turn_number >= 0),
    -- The claim it was asked under (a repeated ask with the same claim token gets the same answer).
    claim_generation  BIGINT NOT NULL,
    request_hash      BYTEA NOT NULL,
    response          JSONB,
    question          TEXT NOT NULL CHECK (length(question) BETWEEN 1 AND 500),
    options           JSONB NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(options) = 'array'),
    status            TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'answered', 'unanswered')),
    answer            TEXT CHECK (length(answer) BETWEEN 1 AND 1000),
    asked_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at        TIMESTAMPTZ NOT NULL,
    answered_at       TIMESTAMPTZ,
    CONSTRAINT person_questions_answered_check CHECK ((status = 'answered') = (answer IS NOT NULL)),
    CONSTRAINT person_questions_claim_key UNIQUE (task_id, claim_generation)
);
CREATE UNIQUE INDEX person_questions_one_pending_idx ON person_questions (task_id) WHERE status = 'pending';
CREATE INDEX person_questions_task_idx ON person_questions (task_id, turn_number, asked_at);
-- The insights count questions per day.
CREATE INDEX person_questions_asked_idx ON person_questions (asked_at);

-- The new task state (no existing row holds it: the checks are added NOT VALID, then hold for
-- every new write).
ALTER TABLE tasks DROP CONSTRAINT tasks_state_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_state_check
    CHECK (state IN ('submitted', 'working', 'waiting_for_agent', 'claimed', 'waiting_for_person', 'completed',
                     'canceled', 'failed')) NOT VALID;

-- The event a person's question is told by (to the asking person only).
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check
    CHECK (kind IN ('opportunity.status', 'negotiation.turn', 'negotiation.outcome', 'negotiation.round',
                    'delegation.status', 'negotiation.question')) NOT VALID;

-- The insights count questions asked, answered and left unanswered, per day, for everyone and
-- for the asking person (`insight_counts`, kind `question`, keys `asked`, `answered`,
-- `unanswered`).
ALTER TABLE insight_counts DROP CONSTRAINT insight_counts_kind_check;
ALTER TABLE insight_counts ADD CONSTRAINT insight_counts_kind_check
    CHECK (kind IN ('turns', 'outcome', 'answer', 'objection', 'question')) NOT VALID;

-- A negotiation waiting for a person is in progress: the lists of negotiations in progress
-- (`src/store/tasks.rs`) name the state, and read these partial indexes (they hold only the
-- rows in an active state).
DROP INDEX tasks_source_active_idx;
DROP INDEX tasks_candidate_active_idx;
CREATE INDEX tasks_source_active_idx ON tasks (source_user_id, task_id DESC)
    WHERE state IN ('submitted', 'working', 'waiting_for_agent', 'claimed', 'waiting_for_person');
CREATE INDEX tasks_candidate_active_idx ON tasks (candidate_user_id, task_id DESC)
    WHERE state IN ('submitted', 'working', 'waiting_for_agent', 'claimed', 'waiting_for_person');
