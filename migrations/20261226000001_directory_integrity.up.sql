-- A directory that honest agents can trust.
--
-- - A request id belongs to its first requester: unique across all delegations (it was unique
--   per requester, so a second requester could shadow a first one's delegation). Ids that two
--   requesters share already keep the oldest delegation's; the later ones get fresh ids.
-- - Each attempt records whether its end counted for or against its target's trust
--   (`counted`, set when it ends), and whether its requester gave it less time than the
--   target's own estimate (`short_timeout`, fixed when it is offered: such an attempt that
--   does not complete does not count against the target).
-- - `trust_requester_days` counts, per target, requesting owner and UTC day, the attempts
--   that counted: one requester's attempts count at most a configured number of times per
--   target per day, and a trust score stays provisional until enough owners contributed.
-- - `trust_records.provisional` is stored with the record, as discovery reads it.
-- - An index for the open attempts of a target (its queue depth in a ranking).

UPDATE delegations d SET request_id = gen_random_uuid()
  FROM (SELECT delegation_id, row_number() OVER (PARTITION BY request_id ORDER BY delegation_id) AS n
          FROM delegations) r
 WHERE r.delegation_id = d.delegation_id AND r.n > 1;
ALTER TABLE delegations DROP CONSTRAINT delegations_request_key;
DROP INDEX delegations_request_idx;
ALTER TABLE delegations ADD CONSTRAINT delegations_request_id_key UNIQUE (request_id);

ALTER TABLE delegation_attempts
    ADD COLUMN counted BOOLEAN,
    ADD COLUMN short_timeout BOOLEAN NOT NULL DEFAULT false;
COMMENT ON COLUMN delegation_attempts.counted IS
    'Set when the attempt ends: whether the end counted for or against its target''s trust.';
COMMENT ON COLUMN delegation_attempts.short_timeout IS
    'The delegation''s timeoutMs was below the target capability''s estimatedLatencyMs when offered.';
UPDATE delegation_attempts SET counted = (reason IS DISTINCT FROM 'rate_limited') WHERE ended_at IS NOT NULL;
CREATE INDEX delegation_attempts_open_idx ON delegation_attempts (target_agent_id)
    WHERE status IN ('request', 'accepted');

CREATE TABLE trust_requester_days (
    target_agent_id     UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    -- The user who owns the requesting agent: a requester is counted by its owner, so that
    -- registering more agents does not buy more counted attempts.
    requester_owner_id  TEXT NOT NULL,
    day                 DATE NOT NULL,
    counted             INTEGER NOT NULL CHECK (counted > 0),
    PRIMARY KEY (target_agent_id, requester_owner_id, day)
)
WITH (fillfactor = 50);

ALTER TABLE trust_records ADD COLUMN provisional BOOLEAN NOT NULL DEFAULT true;
CREATE OR REPLACE VIEW trust_percentiles AS
SELECT agent_id, raw, events,
       CASE WHEN count(*) OVER () <= 1 THEN 100
            ELSE round(100.0 * (rank() OVER (ORDER BY raw) - 1) / (count(*) OVER () - 1))::integer END AS percentile,
       provisional
  FROM trust_records;

-- Functions whose arguments or results change (their files define the new ones).
DROP FUNCTION IF EXISTS parley_trust_scores(uuid);
DROP FUNCTION IF EXISTS parley_delegation_move(uuid, integer, text, text, jsonb, text, text, integer, text);
DROP FUNCTION IF EXISTS parley_delegation_complete(bytea, uuid, uuid, uuid, integer, jsonb);
DROP FUNCTION IF EXISTS parley_delegation_open(bytea, uuid, uuid, uuid, text, text, integer);
DROP FUNCTION IF EXISTS parley_delegation_offer(uuid, integer, uuid, uuid, uuid, uuid, uuid, jsonb, timestamptz,
                                                timestamptz, timestamptz, text);
DROP FUNCTION IF EXISTS parley_delegation_make(uuid, uuid, uuid, text, text, jsonb, uuid, bigint, boolean, integer,
                                               timestamptz, bigint, uuid, uuid, uuid, uuid, uuid, jsonb, timestamptz,
                                               timestamptz, text);
