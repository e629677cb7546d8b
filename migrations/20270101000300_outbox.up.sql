-- Pushes: Parley tells, nobody polls.
--
-- The event log (`events`) is the outbox: every event is written in the transaction that makes
-- the change it describes, with its id as its sequence. An event is delivered to every target
-- that wants it, a target being a webhook endpoint (Standard Webhooks, registered by the
-- platform or by a person) or an A2A push notification configuration (registered by the
-- requester of a delegation). The trigger of `functions/parley_outbox_fan_out.sql` writes one
-- delivery row per target in the event's own transaction, and arms the job that sends them.

CREATE TABLE outbox_targets (
    target_id              UUID PRIMARY KEY,
    kind                   TEXT NOT NULL CHECK (kind IN ('webhook', 'a2a_push')),
    url                    TEXT NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    -- Disabled by its owner, by a 410 answer, or after failing for days; `disabled_reason` says.
    status                 TEXT NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'disabled')),
    disabled_reason        TEXT CHECK (length(disabled_reason) <= 300),
    disabled_at            TIMESTAMPTZ,
    -- The first failed attempt since the last success (none while it succeeds).
    failing_since          TIMESTAMPTZ,
    -- The last attempt, for the owner's list and the status page.
    last_attempt_at        TIMESTAMPTZ,
    last_attempt_ok        BOOLEAN,
    last_status_code       INTEGER,
    last_error             TEXT CHECK (length(last_error) <= 300),
    last_event_id          BIGINT,
    last_event_kind        TEXT,
    created_at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- A webhook: whose events it gets (NULL: the platform, every event; else a person, the
    -- events that person may see), which kinds, and its signing secrets (the one before the
    -- last rotation signs beside it until `previous_secret_until`).
    owner_user_id          TEXT CHECK (length(owner_user_id) BETWEEN 1 AND 256),
    event_types            TEXT[],
    secret                 TEXT,
    previous_secret        TEXT,
    previous_secret_until  TIMESTAMPTZ,
    -- An A2A push notification configuration: the delegation (the A2A task) whose status
    -- events it gets, the requester's id for it, the protocol version it was set in (the body's
    -- form), and what Parley presents (the token, and the credentials, never read back).
    delegation_id          UUID REFERENCES delegations ON DELETE CASCADE,
    request_id             UUID,
    config_id              TEXT CHECK (length(config_id) BETWEEN 1 AND 256),
    a2a_version            TEXT CHECK (a2a_version IN ('1.0', '0.3')),
    push_token             TEXT CHECK (length(push_token) <= 1024),
    auth_scheme            TEXT CHECK (length(auth_scheme) <= 64),
    auth_credentials       TEXT CHECK (length(auth_credentials) <= 4096),
    CONSTRAINT outbox_targets_webhook_check CHECK (
        (kind = 'webhook') = (event_types IS NOT NULL AND secret IS NOT NULL)),
    CONSTRAINT outbox_targets_push_check CHECK (
        (kind = 'a2a_push') = (delegation_id IS NOT NULL AND request_id IS NOT NULL AND config_id IS NOT NULL
                               AND a2a_version IS NOT NULL)),
    CONSTRAINT outbox_targets_config_key UNIQUE (delegation_id, config_id)
);
-- The fan-out reads the enabled webhooks on every event, and a delegation's push targets by
-- its request id on every `delegation.status` event.
CREATE INDEX outbox_targets_webhooks_idx ON outbox_targets (created_at) WHERE kind = 'webhook' AND status = 'enabled';
CREATE INDEX outbox_targets_owner_idx ON outbox_targets (owner_user_id, created_at) WHERE kind = 'webhook';
CREATE INDEX outbox_targets_request_idx ON outbox_targets (request_id) WHERE kind = 'a2a_push';

-- One event to one target: its delivery log row, and its place in the queue while `pending`.
-- `queued_at` starts the retry window (a redelivery starts it again); `leased_until` is held
-- while a sender has it in flight, so that a sender killed mid-call lets it go by itself.
CREATE TABLE outbox_deliveries (
    target_id         UUID NOT NULL REFERENCES outbox_targets ON DELETE CASCADE,
    event_id          BIGINT NOT NULL REFERENCES events ON DELETE CASCADE,
    status            TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts          INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    leased_until      TIMESTAMPTZ,
    queued_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_attempt_at   TIMESTAMPTZ,
    last_status_code  INTEGER,
    last_error        TEXT CHECK (length(last_error) <= 300),
    last_response_ms  INTEGER,
    delivered_at      TIMESTAMPTZ,
    PRIMARY KEY (target_id, event_id)
)
WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02);
CREATE INDEX outbox_deliveries_due_idx ON outbox_deliveries (target_id, next_at) WHERE status = 'pending';
CREATE INDEX outbox_deliveries_pending_idx ON outbox_deliveries (next_at) WHERE status = 'pending';
CREATE INDEX outbox_deliveries_leased_idx ON outbox_deliveries (target_id) WHERE leased_until IS NOT NULL;
CREATE INDEX outbox_deliveries_event_idx ON outbox_deliveries (event_id);
CREATE INDEX outbox_deliveries_ended_idx ON outbox_deliveries ((coalesce(last_attempt_at, queued_at)))
    WHERE status <> 'pending';
