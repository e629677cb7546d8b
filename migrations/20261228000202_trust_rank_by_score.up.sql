-- Trust percentiles ranked by score, not by agent.
--
-- A percentile is the share of the trust population with a strictly lower raw score. The view
-- ranked every record (a sort of the whole population) whenever discovery rebuilt a snapshot.
-- Raw scores have two decimals from 0 to 100, so the population holds at most 10 001 distinct
-- ones: the view now counts the records per score (from the index on `raw`), ranks those
-- counts, and gives each record the rank of its score. Same numbers, same columns.
--
-- `GET /api/trust/{agentId}` counts the records below the agent's score from the same index
-- (`parley_trust_of`).
CREATE INDEX trust_records_raw_idx ON trust_records (raw);

CREATE OR REPLACE VIEW trust_percentiles AS
WITH scores AS (
    SELECT raw, count(*) AS n FROM trust_records GROUP BY raw
), ranked AS (
    SELECT raw, sum(n) OVER (ORDER BY raw) - n AS lower, sum(n) OVER () AS total FROM scores
)
SELECT r.agent_id, r.raw, r.events,
       CASE WHEN k.total <= 1 THEN 100 ELSE round(100.0 * k.lower / (k.total - 1))::integer END AS percentile,
       r.provisional
  FROM trust_records r JOIN ranked k ON k.raw = r.raw;
