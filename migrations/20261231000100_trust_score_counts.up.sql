-- Trust percentiles from a count of records per score, never from the whole population.
--
-- A percentile is the share of the trust population with a strictly lower raw score. It was
-- read by counting the records (from an index on `raw`) each time a discovery snapshot was
-- built or one agent's trust was asked: work in proportion to the population, 100 000 agents
-- a year in. Raw scores have two decimals from 0 to 100, so there are at most 10 001 distinct
-- ones: `trust_score_counts` holds how many records have each, kept by a deferred trigger on
-- `trust_records` (`parley_trust_score_counted`, which also counts them afresh when it is first
-- applied), and `trust_score_ranks` gives each score its percentile from those counts. Same
-- numbers, same columns in `trust_percentiles`; nothing reads `trust_records` by `raw` now,
-- so its index goes (a changed score no longer writes it).
CREATE TABLE trust_score_counts (
    raw     NUMERIC PRIMARY KEY,
    -- Records with this raw score (0 once the last one moved away: the row stays).
    n       BIGINT NOT NULL
);

-- Each raw score held by a record, with its percentile: round(100 * records with a strictly
-- lower score / (N - 1)) over the N records; 100 when N <= 1.
CREATE VIEW trust_score_ranks AS
SELECT raw, CASE WHEN total <= 1 THEN 100 ELSE round(100.0 * lower / (total - 1))::integer END AS percentile
  FROM (SELECT raw, sum(n) OVER (ORDER BY raw) - n AS lower, sum(n) OVER () AS total
          FROM trust_score_counts WHERE n > 0) k;

CREATE OR REPLACE VIEW trust_percentiles AS
SELECT r.agent_id, r.raw, r.events, k.percentile, r.provisional
  FROM trust_records r JOIN trust_score_ranks k ON k.raw = r.raw;

DROP INDEX trust_records_raw_idx;
