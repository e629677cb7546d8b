-- The agent directory: what agents offer (capabilities and their permissions), the anonymous ids
-- under which others see them, and the per-agent daily counters their trust is computed from.

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
CREATE UNIQUE INDEX anonymous_ids_current_key ON anonymous_ids (agent_id) WHERE current;
CREATE INDEX anonymous_ids_agent_idx ON anonymous_ids (agent_id);

-- An agent's record as the one doing the work, one row per agent and UTC day, written by the
-- transactions that end its claims (and, with delegation, its attempts). Trust reads these,
-- never the history itself.
CREATE TABLE agent_trust_days (
    agent_id         UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    day              DATE NOT NULL,
    -- Turns it claimed and answered before the claim expired.
    claims_answered  INTEGER NOT NULL DEFAULT 0,
    -- Turns it claimed and let the claim expire.
    claims_expired   INTEGER NOT NULL DEFAULT 0,
    -- Turns it claimed and gave back (neither for nor against it).
    claims_released  INTEGER NOT NULL DEFAULT 0,
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, day)
);

-- The end of a claim counts for or against its holder: a respond (the turn count grew), an
-- expiry (the claim had lapsed) or a release. One upsert, in the transaction that ends the
-- claim; a claim ended because the negotiation itself ended (cancelled, deadline) counts for
-- nothing.
CREATE FUNCTION parley_count_claim_end() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    answered integer := 0;
    expired integer := 0;
    released integer := 0;
BEGIN
    IF OLD.claim_agent_id IS NULL THEN
        RETURN NULL;
    END IF;
    IF NEW.turn_count > OLD.turn_count THEN
        answered := 1;
    ELSIF OLD.claim_expires_at <= clock_timestamp() THEN
        expired := 1;
    ELSIF NEW.state = 'waiting_for_agent' THEN
        released := 1;
    ELSE
        RETURN NULL;
    END IF;
    INSERT INTO agent_trust_days AS d (agent_id, day, claims_answered, claims_expired, claims_released)
    VALUES (OLD.claim_agent_id, (now() AT TIME ZONE 'UTC')::date, answered, expired, released)
    ON CONFLICT (agent_id, day) DO UPDATE
       SET claims_answered = d.claims_answered + EXCLUDED.claims_answered,
           claims_expired = d.claims_expired + EXCLUDED.claims_expired,
           claims_released = d.claims_released + EXCLUDED.claims_released,
           updated_at = now();
    RETURN NULL;
END
$$;
CREATE TRIGGER tasks_claim_end AFTER UPDATE OF state ON tasks
    FOR EACH ROW WHEN (OLD.state = 'claimed' AND NEW.state <> 'claimed')
    EXECUTE FUNCTION parley_count_claim_end();

-- Every agent's trust, in one query: the agents with a capability or a record in the last 90
-- days, plus `p_agent` when given (an agent asking about itself before it has either).
--   health     = mean over the last 30 days with activity of the day's share of claims
--                answered before they expired, times 100; 50 with none
--   delegation = 50 until delegations are recorded
--   raw        = 0.6 * health + 0.4 * delegation, 2 decimals
--   percentile = round(100 * agents with a strictly lower raw / (N - 1)); 100 when N <= 1
--   events     = claims answered or expired in the last 90 days
CREATE FUNCTION parley_trust_scores(p_agent uuid)
RETURNS TABLE (agent_id uuid, health numeric, delegation numeric, raw numeric, percentile integer,
               events bigint, updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    WITH today AS (
        SELECT (now() AT TIME ZONE 'UTC')::date AS d
    ), population AS (
        SELECT c.agent_id FROM capabilities c
        UNION
        SELECT t.agent_id FROM agent_trust_days t, today WHERE t.day > today.d - 90
        UNION
        SELECT a.agent_id FROM agents a WHERE a.agent_id = p_agent
    ), record AS (
        SELECT t.agent_id,
               avg(t.claims_answered::numeric / (t.claims_answered + t.claims_expired))
                   FILTER (WHERE t.day > today.d - 30 AND t.claims_answered + t.claims_expired > 0) * 100 AS health,
               sum(t.claims_answered + t.claims_expired) AS events,
               max(t.updated_at) AS updated_at
          FROM agent_trust_days t, today
         WHERE t.day > today.d - 90
         GROUP BY t.agent_id
    ), scored AS (
        SELECT p.agent_id,
               coalesce(r.health, 50) AS health,
               50::numeric AS delegation,
               round(0.6 * coalesce(r.health, 50) + 0.4 * 50, 2) AS raw,
               coalesce(r.events, 0)::bigint AS events,
               r.updated_at
          FROM population p LEFT JOIN record r ON r.agent_id = p.agent_id
    )
    SELECT s.agent_id, round(s.health, 2), s.delegation, s.raw,
           CASE WHEN count(*) OVER () <= 1 THEN 100
                ELSE round(100.0 * (rank() OVER (ORDER BY s.raw) - 1) / (count(*) OVER () - 1))::integer END,
           s.events, s.updated_at
      FROM scored s
$$;
