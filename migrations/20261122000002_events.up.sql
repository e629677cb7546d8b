-- Events for the web UI's live stream (`GET /api/events`). Written in the transaction of the
-- state change they describe, announced with NOTIFY after commit, kept for a day so that a
-- reconnecting client can resume with Last-Event-ID.
CREATE TABLE events (
    event_id           BIGSERIAL PRIMARY KEY,
    kind               TEXT NOT NULL
        CHECK (kind IN ('opportunity.status', 'negotiation.turn', 'negotiation.outcome')),
    opportunity_id     UUID NOT NULL,
    -- The two people who may see it.
    source_user_id     TEXT NOT NULL,
    candidate_user_id  TEXT NOT NULL,
    data               JSONB NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX events_created_idx ON events (created_at);
CREATE INDEX events_source_user_idx ON events (source_user_id, event_id);
CREATE INDEX events_candidate_user_idx ON events (candidate_user_id, event_id);
