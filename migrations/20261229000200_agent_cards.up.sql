-- Agents that are called instead of polling: an agent registered by its AgentCard URL.
--
-- One row per such agent (an agent without one polls, as every agent did before). The row keeps
-- what a call to the agent needs, read once from the card when it was fetched: the JSON-RPC
-- endpoint chosen on it, the protocol version the card gives for it and the dialect Parley
-- speaks there (`1.0`, `0.3`, or `bindu` for Bindu's agents, which claim 1.0 but answer 0.3
-- method names), whether it streams, and the credential Parley presents to that endpoint. The
-- card itself is kept whole (at most 64 KiB) for what a later call may need from it.
--
-- The credential is Parley's to present, so it is stored as it was given (it cannot be
-- hashed); no read of the API ever returns it. Deleting the agent deletes the row (the service
-- soft-deletes agents and removes it in the same transaction; a row deleted by hand cascades).
CREATE TABLE agent_cards (
    agent_id          UUID PRIMARY KEY REFERENCES agents ON DELETE CASCADE,
    card_url          TEXT NOT NULL CHECK (length(card_url) BETWEEN 1 AND 2048),
    interface_url     TEXT NOT NULL CHECK (length(interface_url) BETWEEN 1 AND 2048),
    protocol_version  TEXT NOT NULL,
    dialect           TEXT NOT NULL CHECK (dialect IN ('1.0', '0.3', 'bindu')),
    name              TEXT NOT NULL,
    description       TEXT NOT NULL,
    -- [{id, name}] of the card's skills (the first 100).
    skills            JSONB NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(skills) = 'array'),
    streaming         BOOLEAN NOT NULL,
    card              JSONB NOT NULL CHECK (jsonb_typeof(card) = 'object'),
    -- `bearer` or `basic`: sent as `Authorization: Bearer <credential>` (or Basic).
    auth_scheme       TEXT CHECK (auth_scheme IN ('bearer', 'basic')),
    auth_credential   TEXT,
    fetched_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT agent_cards_auth_whole CHECK ((auth_scheme IS NULL) = (auth_credential IS NULL))
);
COMMENT ON TABLE agent_cards IS
    'Agents Parley calls over A2A (registered by AgentCard URL); an agent without a row polls.';
COMMENT ON COLUMN agent_cards.auth_credential IS
    'What Parley presents to the agent''s endpoint; never returned by any read of the API.';
