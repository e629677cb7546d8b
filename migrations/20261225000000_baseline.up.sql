-- Parley's schema: tables, constraints, indexes and storage settings. The SQL functions and the
-- triggers that call them are not here: each lives in its own file under
-- `migrations/functions/`, applied after the migrations (see `src/db/definitions.rs`).
--
-- Every status column is CHECKed against its state machine's states (`src/domain`,
-- `src/directory/delegation/state.rs`). Ids are UUIDv7 made by the service (listings page by
-- them); user ids are the platform's strings.

-- Negotiations ---------------------------------------------------------------------------------

CREATE TABLE opportunities (
    opportunity_id     UUID PRIMARY KEY,
    status             TEXT NOT NULL
        CONSTRAINT opportunities_status_check
        CHECK (status IN ('negotiating', 'pending', 'accepted', 'rejected', 'stalled', 'expired')),
    -- The evaluator's seed score (0-100); negotiation never re-scores it.
    score              DOUBLE PRECISION NOT NULL CHECK (score >= 0 AND score <= 100),
    source_user_id     TEXT NOT NULL,
    candidate_user_id  TEXT NOT NULL,
    seed_assessment    JSONB NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT opportunities_distinct_users CHECK (source_user_id <> candidate_user_id)
);
CREATE INDEX opportunities_source_user_idx ON opportunities (source_user_id, opportunity_id DESC);
CREATE INDEX opportunities_candidate_user_idx ON opportunities (candidate_user_id, opportunity_id DESC);
CREATE INDEX opportunities_status_idx ON opportunities (status, opportunity_id DESC);
-- Insights: the opportunities that expired undecided, by when (all, or one person's).
CREATE INDEX opportunities_expired_idx ON opportunities (updated_at) WHERE status = 'expired';
CREATE INDEX opportunities_source_expired_idx ON opportunities (source_user_id, updated_at) WHERE status = 'expired';
CREATE INDEX opportunities_candidate_expired_idx ON opportunities (candidate_user_id, updated_at)
    WHERE status = 'expired';

-- An A2A context: one per opportunity; each round of negotiation is a task in it.
CREATE TABLE conversations (
    conversation_id  UUID PRIMARY KEY,
    opportunity_id   UUID NOT NULL REFERENCES opportunities ON DELETE CASCADE,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX conversations_opportunity_idx ON conversations (opportunity_id);

CREATE TABLE conversation_participants (
    conversation_id  UUID NOT NULL REFERENCES conversations ON DELETE CASCADE,
    -- `agent:{userId}`: the agent speaking for that user, whoever plays it.
    participant_id   TEXT NOT NULL,
    user_id          TEXT NOT NULL,
    side             TEXT NOT NULL CHECK (side IN ('source', 'candidate')),
    PRIMARY KEY (conversation_id, participant_id)
);

CREATE TABLE agents (
    agent_id          UUID PRIMARY KEY,
    owner_user_id     TEXT NOT NULL,
    name              TEXT NOT NULL,
    agent_type        TEXT NOT NULL DEFAULT 'personal' CHECK (agent_type IN ('personal')),
    status            TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
    negotiation_mode  TEXT NOT NULL DEFAULT 'enabled' CHECK (negotiation_mode IN ('enabled', 'disabled')),
    description       TEXT,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- When an authenticated call of the agent was last seen (written at most every few seconds).
    last_seen_at      TIMESTAMPTZ
);
CREATE INDEX agents_owner_idx ON agents (owner_user_id, agent_id);

CREATE TABLE api_keys (
    api_key_id    UUID PRIMARY KEY,
    agent_id      UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    -- The first characters of the key, shown to tell keys apart; the key itself is never stored.
    prefix        TEXT NOT NULL,
    -- SHA-256 of the whole key.
    key_hash      BYTEA NOT NULL CONSTRAINT api_keys_key_hash_key UNIQUE,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at    TIMESTAMPTZ,
    revoked_at    TIMESTAMPTZ,
    last_used_at  TIMESTAMPTZ
);
CREATE INDEX api_keys_agent_idx ON api_keys (agent_id);

-- The A2A task that is one round of a negotiation; its id is the negotiationId of the API.
CREATE TABLE tasks (
    task_id             UUID PRIMARY KEY,
    conversation_id     UUID NOT NULL REFERENCES conversations ON DELETE CASCADE,
    opportunity_id      UUID NOT NULL REFERENCES opportunities ON DELETE CASCADE,
    state               TEXT NOT NULL
        CONSTRAINT tasks_state_check
        CHECK (state IN ('submitted', 'working', 'waiting_for_agent', 'claimed', 'completed', 'canceled', 'failed')),
    source_user_id      TEXT NOT NULL,
    candidate_user_id   TEXT NOT NULL,
    source_kind         TEXT NOT NULL CHECK (source_kind IN ('system', 'personal')),
    candidate_kind      TEXT NOT NULL CHECK (candidate_kind IN ('system', 'personal')),
    -- Each side's full absolute context as the platform gave it (UserContext JSON).
    source_context      JSONB NOT NULL,
    candidate_context   JSONB NOT NULL,
    seed_assessment     JSONB NOT NULL,
    index_context       JSONB,
    discovery_query     TEXT,
    max_turns           INTEGER NOT NULL CHECK (max_turns >= 0),
    turn_count          INTEGER NOT NULL DEFAULT 0 CHECK (turn_count >= 0),
    -- Parked: whose personal agent the turn waits for, and since when (per turn).
    awaiting_user_id    TEXT,
    first_parked_at     TIMESTAMPTZ,
    -- Claimed: which agent holds the turn, and until when. The generation grows with every
    -- claim; the claim token is derived from it (never stored), so stale timers and stale
    -- tokens can be told apart.
    claim_agent_id      UUID REFERENCES agents ON DELETE SET NULL,
    claim_generation    BIGINT NOT NULL DEFAULT 0,
    claim_expires_at    TIMESTAMPTZ,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    completed_at        TIMESTAMPTZ,
    -- The opportunity's rounds, 0 first; a reactivation opens the next one.
    round               INTEGER NOT NULL DEFAULT 0 CHECK (round >= 0),
    -- The earlier rounds as pickup shows them (`[{negotiationId, turns, outcome}]`).
    previous_rounds     JSONB,
    CONSTRAINT tasks_opportunity_round_key UNIQUE (opportunity_id, round),
    CONSTRAINT tasks_parked_has_seat CHECK (
        state NOT IN ('waiting_for_agent', 'claimed') OR (awaiting_user_id IS NOT NULL AND first_parked_at IS NOT NULL)),
    CONSTRAINT tasks_claim_complete CHECK ((state = 'claimed') = (claim_expires_at IS NOT NULL))
)
WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05);
-- Pickup: the oldest parked turn for a user.
CREATE INDEX tasks_parked_idx ON tasks (awaiting_user_id, first_parked_at, task_id)
    WHERE state = 'waiting_for_agent';
-- An agent holds at most one live turn claim.
CREATE UNIQUE INDEX tasks_one_claim_per_agent ON tasks (claim_agent_id) WHERE state = 'claimed';
-- Recovery: the tasks left runnable by a crash.
CREATE INDEX tasks_runnable_idx ON tasks (updated_at) WHERE state IN ('submitted', 'working');
CREATE INDEX tasks_source_user_idx ON tasks (source_user_id, task_id DESC);
CREATE INDEX tasks_candidate_user_idx ON tasks (candidate_user_id, task_id DESC);
-- Insights: negotiations that ended in a range (all, or one person's).
CREATE INDEX tasks_completed_idx ON tasks (completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX tasks_source_completed_idx ON tasks (source_user_id, completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX tasks_candidate_completed_idx ON tasks (candidate_user_id, completed_at) WHERE completed_at IS NOT NULL;

-- The hub's queue depth (tasks not yet terminal), kept exact by triggers in the transactions
-- that change it, in 16 rows so that concurrent starts and ends rarely wait on one another.
-- Reading it is a sum over 16 rows instead of a count over every active task.
CREATE TABLE task_counts (
    shard   SMALLINT PRIMARY KEY,
    active  BIGINT NOT NULL DEFAULT 0
)
WITH (fillfactor = 20, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
INSERT INTO task_counts (shard, active) SELECT s, 0 FROM generate_series(0, 15) s;

-- One message per turn.
CREATE TABLE messages (
    message_id        UUID PRIMARY KEY,
    task_id           UUID NOT NULL REFERENCES tasks ON DELETE CASCADE,
    turn_number       INTEGER NOT NULL CHECK (turn_number >= 0),
    side              TEXT NOT NULL CHECK (side IN ('source', 'candidate')),
    sender_id         TEXT NOT NULL,
    action            TEXT NOT NULL CHECK (action IN ('propose', 'counter', 'accept', 'reject', 'question')),
    -- `[{kind: "data", data: {action, assessment, message}}]`
    parts             JSONB NOT NULL,
    played_by         TEXT NOT NULL CHECK (played_by IN ('system', 'personal')),
    agent_id          UUID REFERENCES agents ON DELETE SET NULL,
    -- A turn answered under a claim: the claim's generation, the request's hash and the answer
    -- given, so that a retried respond with the same token and body gets the same answer.
    request_hash      BYTEA,
    response          JSONB,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    claim_generation  BIGINT,
    CONSTRAINT messages_task_turn_key UNIQUE (task_id, turn_number)
)
WITH (autovacuum_vacuum_insert_scale_factor = 0.05);

CREATE TABLE artifacts (
    artifact_id  UUID PRIMARY KEY,
    task_id      UUID NOT NULL REFERENCES tasks ON DELETE CASCADE,
    name         TEXT NOT NULL,
    parts        JSONB NOT NULL,
    metadata     JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The outcome is written once.
    CONSTRAINT artifacts_task_name_key UNIQUE (task_id, name)
);

CREATE TABLE opportunity_decisions (
    opportunity_id  UUID NOT NULL REFERENCES opportunities ON DELETE CASCADE,
    user_id         TEXT NOT NULL,
    decision        TEXT NOT NULL CHECK (decision IN ('accept', 'decline')),
    decided_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (opportunity_id, user_id)
);
CREATE INDEX opportunity_decisions_decided_idx ON opportunity_decisions (decided_at);
CREATE INDEX opportunity_decisions_user_decided_idx ON opportunity_decisions (user_id, decided_at);

-- Events for the web UI's live stream (`GET /api/events`), written in the transaction of the
-- state change they describe and read back in id order by every process; kept for a day so
-- that a reconnecting client can resume with Last-Event-ID.
CREATE TABLE events (
    event_id           BIGSERIAL PRIMARY KEY,
    kind               TEXT NOT NULL
        CONSTRAINT events_kind_check
        CHECK (kind IN ('opportunity.status', 'negotiation.turn', 'negotiation.outcome', 'negotiation.round',
                        'delegation.status')),
    -- The opportunity, for negotiation events (delegation events belong to none).
    opportunity_id     UUID,
    -- The two people who may see it.
    source_user_id     TEXT NOT NULL,
    candidate_user_id  TEXT NOT NULL,
    data               JSONB NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now()
)
WITH (autovacuum_vacuum_insert_scale_factor = 0.05);
CREATE INDEX events_source_user_idx ON events (source_user_id, event_id);
CREATE INDEX events_candidate_user_idx ON events (candidate_user_id, event_id);
CREATE INDEX events_created_idx ON events (created_at);

-- The directory -------------------------------------------------------------------------------

CREATE TABLE capabilities (
    capability_id         UUID PRIMARY KEY,
    agent_id              UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    task_type             TEXT NOT NULL
        CONSTRAINT capabilities_task_type_check
        CHECK (task_type IN ('code-review', 'code-generation', 'testing', 'documentation', 'analysis',
                             'summarization', 'translation', 'custom')),
    -- Set exactly for `custom`.
    custom_type           TEXT,
    -- Both compiled as JSON Schema when registered; stored as given.
    input_schema          JSONB NOT NULL,
    output_schema         JSONB NOT NULL,
    estimated_latency_ms  BIGINT CHECK (estimated_latency_ms >= 0),
    estimated_cost_usd    DOUBLE PRECISION CHECK (estimated_cost_usd >= 0),
    description           TEXT,
    tags                  JSONB NOT NULL DEFAULT '[]'::jsonb,
    -- A skill in the assessment's schema, when the agent gave one.
    skill                 JSONB,
    -- Permissions.
    enabled               BOOLEAN NOT NULL DEFAULT true,
    accept_delegations    BOOLEAN NOT NULL DEFAULT true,
    inbound_rate_limit    INTEGER NOT NULL DEFAULT 10 CHECK (inbound_rate_limit >= 0),
    outbound_rate_limit   INTEGER NOT NULL DEFAULT 20 CHECK (outbound_rate_limit >= 0),
    created_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT capabilities_custom_type_check CHECK ((task_type = 'custom') = (custom_type IS NOT NULL)),
    -- One capability per agent and kind of work: registering it again replaces it.
    CONSTRAINT capabilities_agent_kind_key UNIQUE NULLS NOT DISTINCT (agent_id, task_type, custom_type)
);
-- Discovery: the enabled capabilities of a type.
CREATE INDEX capabilities_discovery_idx ON capabilities (task_type, custom_type) WHERE enabled;

-- Every anonymous id ever issued, so that an old one still resolves in records. At most one per
-- agent is `current`; it is replaced (a new row) on the first use after it expired.
CREATE TABLE anonymous_ids (
    anonymous_id  UUID PRIMARY KEY,
    agent_id      UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    issued_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at    TIMESTAMPTZ NOT NULL,
    current       BOOLEAN NOT NULL DEFAULT true
);
CREATE INDEX anonymous_ids_agent_idx ON anonymous_ids (agent_id);
CREATE UNIQUE INDEX anonymous_ids_current_key ON anonymous_ids (agent_id) WHERE current;
-- Discovery: the current ids that expired (almost always none).
CREATE INDEX anonymous_ids_current_expiry_idx ON anonymous_ids (expires_at) WHERE current;

-- An agent's record as the one doing the work, one row per agent and UTC day, written by the
-- transactions that end its claims and its delegation attempts. Trust reads these, never the
-- history itself. Small rows updated in place all day: half-full pages keep room for updates
-- on the same page, and the table is vacuumed after a fixed number of dead rows.
CREATE TABLE agent_trust_days (
    agent_id             UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    day                  DATE NOT NULL,
    -- Turns it claimed and answered before the claim expired.
    claims_answered      INTEGER NOT NULL DEFAULT 0,
    -- Turns it claimed and let the claim expire.
    claims_expired       INTEGER NOT NULL DEFAULT 0,
    -- Turns it claimed and gave back (neither for nor against it).
    claims_released      INTEGER NOT NULL DEFAULT 0,
    updated_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Delegation attempts addressed to it that ended: completed, or not (rejected, timed out,
    -- failed).
    attempts_completed   INTEGER NOT NULL DEFAULT 0,
    attempts_unfinished  INTEGER NOT NULL DEFAULT 0,
    -- Of the attempts it had accepted: completed in time, or not.
    accepted_completed   INTEGER NOT NULL DEFAULT 0,
    accepted_unfinished  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, day)
)
WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000);
CREATE INDEX agent_trust_days_day_idx ON agent_trust_days (day);

-- One row per agent of the trust population (a capability, or a record in the last 90 days),
-- with the numbers that depend on its own counters only, as of `as_of` (a UTC day: the 30- and
-- 90-day windows move at midnight, so a row of an earlier day is recomputed on the next read).
CREATE TABLE trust_records (
    agent_id    UUID PRIMARY KEY REFERENCES agents ON DELETE CASCADE,
    -- Unrounded; 50 with no activity in the last 30 days.
    health      NUMERIC NOT NULL,
    -- 0.6 * health + 0.4 * delegation, 2 decimals.
    raw         NUMERIC NOT NULL,
    events      BIGINT NOT NULL,
    updated_at  TIMESTAMPTZ,
    as_of       DATE NOT NULL
)
WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000);
COMMENT ON COLUMN trust_records.events IS 'Claims answered or expired and attempts finished in the last 90 days.';
CREATE INDEX trust_records_as_of_idx ON trust_records (as_of);

-- Every agent of the population ranked by its raw score, as discovery and ranking read it:
-- round(100 * agents with a strictly lower raw score / (N - 1)); 100 when N <= 1.
CREATE VIEW trust_percentiles AS
SELECT agent_id, raw, events,
       CASE WHEN count(*) OVER () <= 1 THEN 100
            ELSE round(100.0 * (rank() OVER (ORDER BY raw) - 1) / (count(*) OVER () - 1))::integer END AS percentile
  FROM trust_records;

-- A version of everything discovery and ranking read (capabilities, agents' status and owner,
-- anonymous ids, what discovery reads of trust records), so that a process can keep them in
-- memory and know, with one tiny read, whether what it holds is still the committed state.
-- `epoch` tells databases apart (a process may talk to several); `n` moves once in every
-- transaction that changed any of those rows, when it commits (deferred triggers, see
-- `functions/parley_directory_changed.sql`). `n` comes from a sequence, so a number seen inside
-- a transaction that then rolls back is never reused.
CREATE SEQUENCE directory_version_seq;
CREATE TABLE directory_version (
    one    BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    epoch  UUID NOT NULL DEFAULT gen_random_uuid(),
    n      BIGINT NOT NULL
);
INSERT INTO directory_version (n) VALUES (nextval('directory_version_seq'));

-- Delegation ------------------------------------------------------------------------------------

-- One agent hands a piece of work to another through the directory. A delegation is the
-- requester's request; its attempts are the targets it was offered to, one at a time, the last
-- one live. Statuses are the directory's (`request`, `accepted`, `completed`, `rejected`,
-- `timeout`, `error`). Rows are updated soon after they are written (an accept, an end): room
-- on each page keeps those updates on the page.
CREATE TABLE delegations (
    delegation_id       UUID PRIMARY KEY,
    -- Chosen by the requester (or issued for it): retrying with the same id and body is a no-op.
    request_id          UUID NOT NULL,
    requester_agent_id  UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    task_type           TEXT NOT NULL,
    custom_type         TEXT,
    input               JSONB NOT NULL,
    -- The target the requester named, if any (part of the body a retry must repeat).
    requested_target    UUID,
    timeout_ms          BIGINT NOT NULL CHECK (timeout_ms BETWEEN 1 AND 86400000),
    fallback_enabled    BOOLEAN NOT NULL,
    max_retries         INTEGER NOT NULL CHECK (max_retries BETWEEN 0 AND 10),
    -- Attempts made minus one; the live (or last) attempt is number retries_used + 1.
    retries_used        INTEGER NOT NULL DEFAULT 0 CHECK (retries_used >= 0 AND retries_used <= max_retries),
    -- The last attempt's status.
    status              TEXT NOT NULL
        CHECK (status IN ('request', 'accepted', 'completed', 'rejected', 'timeout', 'error')),
    output              JSONB,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    ended_at            TIMESTAMPTZ,
    -- Its rank among its requester's delegations, handed out under the requester's lock with
    -- times that never go backwards: "N in the last 60 s" is "the N-th newest is in the window",
    -- two probes of `delegations_requester_seq_key` whatever the rate.
    requester_seq       BIGINT NOT NULL,
    CONSTRAINT delegations_ended_check
        CHECK ((ended_at IS NOT NULL) = (status IN ('completed', 'rejected', 'timeout', 'error'))),
    CONSTRAINT delegations_request_key UNIQUE (requester_agent_id, request_id)
)
WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05);
CREATE INDEX delegations_request_idx ON delegations (request_id);
CREATE INDEX delegations_requester_idx ON delegations (requester_agent_id, delegation_id DESC);
CREATE UNIQUE INDEX delegations_requester_seq_key ON delegations (requester_agent_id, requester_seq);

CREATE TABLE delegation_attempts (
    delegation_id           UUID NOT NULL REFERENCES delegations ON DELETE CASCADE,
    -- 1-based; also the generation its claim token carries.
    attempt                 INTEGER NOT NULL CHECK (attempt >= 1),
    target_agent_id         UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    -- The names each side sees the other under (ids issued by the directory's anonymity).
    target_anonymous_id     UUID NOT NULL,
    requester_anonymous_id  UUID NOT NULL,
    capability_id           UUID NOT NULL,
    -- The target's output schema when the attempt was made: what its output is checked against.
    output_schema           JSONB NOT NULL,
    status                  TEXT NOT NULL DEFAULT 'request'
        CHECK (status IN ('request', 'accepted', 'completed', 'rejected', 'timeout', 'error')),
    output                  JSONB,
    reason                  TEXT,
    created_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Not accepted by then: timeout.
    accept_deadline         TIMESTAMPTZ NOT NULL,
    -- Not finished by then (created_at + timeoutMs): timeout.
    deadline                TIMESTAMPTZ NOT NULL,
    accepted_at             TIMESTAMPTZ,
    ended_at                TIMESTAMPTZ,
    -- The attempt as an A2A task (`GET /api/tasks/{id}`).
    task_id                 UUID NOT NULL DEFAULT gen_random_uuid() CONSTRAINT delegation_attempts_task_key UNIQUE,
    -- Its rank among the attempts offered to its target (rate-limited skips have none): the
    -- target's inbound window is read like the requester's outbound one.
    target_seq              BIGINT,
    PRIMARY KEY (delegation_id, attempt),
    CONSTRAINT delegation_attempts_ended_check
        CHECK ((ended_at IS NOT NULL) = (status IN ('completed', 'rejected', 'timeout', 'error')))
)
WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05);
-- The inbox: attempts waiting for their target, oldest first.
CREATE INDEX delegation_attempts_inbox_idx ON delegation_attempts (target_agent_id, created_at) WHERE status = 'request';
CREATE INDEX delegation_attempts_target_idx ON delegation_attempts (target_agent_id, delegation_id DESC);
CREATE UNIQUE INDEX delegation_attempts_target_seq_key ON delegation_attempts (target_agent_id, target_seq);

-- The SQL functions' current definitions (`migrations/functions/`), by file, with the checksum
-- each was last applied with: a file is applied again only when its text changed.
CREATE TABLE parley_definitions (
    name        TEXT PRIMARY KEY,
    checksum    BYTEA NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
