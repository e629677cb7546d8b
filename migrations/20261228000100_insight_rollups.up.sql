-- Insights from per-day rollups.
--
-- `GET /api/insights` used to rebuild its figures from the history itself: every negotiation
-- that ended in the range, its turns and their reasoning. A year of history made that seconds
-- of sequential scans and sorts. Now each ending is counted once, in the transaction that ends
-- it, into a row per UTC day and scope, and a year is at most 366 such rows per scope.
--
-- `scope` is `''` for everyone (the platform's view) or a user's id (what that user may see).
-- `shard` spreads the rows everyone's endings update over eight rows per day, so that
-- concurrent endings do not wait on one another's row lock; a read sums the shards.

CREATE TABLE insight_days (
    scope               TEXT NOT NULL,
    day                 DATE NOT NULL,
    shard               SMALLINT NOT NULL CHECK (shard BETWEEN 0 AND 7),
    -- Negotiations that ended, by outcome; the sum of their turn counts.
    negotiations        BIGINT NOT NULL DEFAULT 0,
    accepted            BIGINT NOT NULL DEFAULT 0,
    rejected            BIGINT NOT NULL DEFAULT 0,
    turn_cap            BIGINT NOT NULL DEFAULT 0,
    timeout             BIGINT NOT NULL DEFAULT 0,
    canceled            BIGINT NOT NULL DEFAULT 0,
    turns               BIGINT NOT NULL DEFAULT 0,
    -- Turns personal agents answered (for a user: on the user's own side), the sum of their
    -- waits in seconds, and the system negotiator's turns on a personal agent's seat.
    answered            BIGINT NOT NULL DEFAULT 0,
    answer_seconds      DOUBLE PRECISION NOT NULL DEFAULT 0,
    fallbacks           BIGINT NOT NULL DEFAULT 0,
    -- People's decisions, opportunities that expired undecided, claims that lapsed.
    decisions_accepted  BIGINT NOT NULL DEFAULT 0,
    decisions_declined  BIGINT NOT NULL DEFAULT 0,
    expired             BIGINT NOT NULL DEFAULT 0,
    claim_expiries      BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, day, shard)
);
COMMENT ON TABLE insight_days IS
    'What happened per UTC day, for everyone (scope '''') and per user; written by the transactions that end negotiations, record decisions, expire opportunities and lapse claims.';

-- Counts by key beside the day's figures: `turns` (negotiations by their turn count),
-- `outcome` and `answer` (negotiations by their time to outcome, answered turns by their wait,
-- in quarter-octave buckets of milliseconds) and `objection` (terms named missing).
CREATE TABLE insight_counts (
    scope   TEXT NOT NULL,
    day     DATE NOT NULL,
    kind    TEXT NOT NULL CHECK (kind IN ('turns', 'outcome', 'answer', 'objection')),
    key     TEXT NOT NULL,
    shard   SMALLINT NOT NULL CHECK (shard BETWEEN 0 AND 7),
    n       BIGINT NOT NULL,
    PRIMARY KEY (scope, day, kind, key, shard)
);

-- Live endings count in their own shard; housekeeping folds the shards of past days into shard 0,
-- so that a year of a scope reads one row per day and key. These find what is left to fold.
CREATE INDEX insight_days_unfolded_idx ON insight_days (day) WHERE shard <> 0;
CREATE INDEX insight_counts_unfolded_idx ON insight_counts (day) WHERE shard <> 0;

-- History from before the rollups, rolled up after start in batches (never by the migration,
-- so that `serve` starts at once whatever the history's size). Each source is rolled up to the
-- moment this migration ran; everything later is counted as it happens.
CREATE TABLE insight_backfill (
    source      TEXT PRIMARY KEY CHECK (source IN ('negotiations', 'decisions', 'expiries', 'claim_expiries')),
    cutoff      TIMESTAMPTZ NOT NULL,
    -- The last row rolled up, in the source's order (time, then id).
    after_at    TIMESTAMPTZ,
    after_id    TEXT,
    done_at     TIMESTAMPTZ
);
INSERT INTO insight_backfill (source, cutoff)
SELECT s, now() FROM unnest(ARRAY['negotiations', 'decisions', 'expiries', 'claim_expiries']) AS s;

-- The claims that lapsed earlier today, from the agents' daily record (one day's rows): the
-- backfill covers the days before today, and from now on each lapse counts as it happens.
INSERT INTO insight_days (scope, day, shard, claim_expiries)
SELECT scope, day, 0, sum(claims_expired)
  FROM (SELECT unnest(ARRAY['', a.owner_user_id]) AS scope, t.day, t.claims_expired
          FROM agent_trust_days t JOIN agents a ON a.agent_id = t.agent_id
         WHERE t.day = (now() AT TIME ZONE 'UTC')::date AND t.claims_expired > 0) x
 GROUP BY scope, day;
