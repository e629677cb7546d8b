-- Delegation: one agent hands a piece of work to another through the directory. A delegation is
-- the requester's request; its attempts are the targets it was offered to, one at a time, the
-- last one live. Statuses are the directory's (`request`, `accepted`, `completed`, `rejected`,
-- `timeout`, `error`); the allowed moves are the table in `src/directory/delegation/state.rs`.

CREATE TABLE delegations (
    delegation_id        UUID PRIMARY KEY,
    -- Chosen by the requester (or issued for it): retrying with the same id and body is a no-op.
    request_id           UUID NOT NULL,
    requester_agent_id   UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    task_type            TEXT NOT NULL,
    custom_type          TEXT,
    input                JSONB NOT NULL,
    -- The target the requester named, if any (part of the body a retry must repeat).
    requested_target     UUID,
    timeout_ms           BIGINT NOT NULL CHECK (timeout_ms BETWEEN 1 AND 86400000),
    fallback_enabled     BOOLEAN NOT NULL,
    max_retries          INTEGER NOT NULL CHECK (max_retries BETWEEN 0 AND 10),
    -- Attempts made minus one; the live (or last) attempt is number retries_used + 1.
    retries_used         INTEGER NOT NULL DEFAULT 0 CHECK (retries_used >= 0 AND retries_used <= max_retries),
    -- The last attempt's status.
    status               TEXT NOT NULL
        CHECK (status IN ('request', 'accepted', 'completed', 'rejected', 'timeout', 'error')),
    output               JSONB,
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    ended_at             TIMESTAMPTZ,
    CONSTRAINT delegations_ended_check CHECK ((ended_at IS NOT NULL) = (status IN ('completed', 'rejected', 'timeout', 'error'))),
    CONSTRAINT delegations_request_key UNIQUE (requester_agent_id, request_id)
);
CREATE INDEX delegations_request_idx ON delegations (request_id);
CREATE INDEX delegations_requester_idx ON delegations (requester_agent_id, delegation_id DESC);

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
    PRIMARY KEY (delegation_id, attempt),
    CONSTRAINT delegation_attempts_ended_check CHECK ((ended_at IS NOT NULL) = (status IN ('completed', 'rejected', 'timeout', 'error')))
);
-- The inbox: attempts waiting for their target, oldest first.
CREATE INDEX delegation_attempts_inbox_idx ON delegation_attempts (target_agent_id, created_at) WHERE status = 'request';
CREATE INDEX delegation_attempts_target_idx ON delegation_attempts (target_agent_id, delegation_id DESC);

-- An attempt's end counts for or against its target, on the day it ended.
ALTER TABLE agent_trust_days
    ADD COLUMN attempts_completed   INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN attempts_unfinished  INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN accepted_completed   INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN accepted_unfinished  INTEGER NOT NULL DEFAULT 0;
