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
DROP VIEW trust_score_ranks;
DROP TRIGGER IF EXISTS trust_records_score_counted ON trust_records;
DROP TRIGGER IF EXISTS trust_records_score_counted_update ON trust_records;
DROP FUNCTION IF EXISTS parley_trust_score_counted();
DROP TABLE trust_score_counts;
DELETE FROM parley_definitions;
