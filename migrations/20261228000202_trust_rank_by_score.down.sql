CREATE OR REPLACE VIEW trust_percentiles AS
SELECT agent_id, raw, events,
       CASE WHEN count(*) OVER () <= 1 THEN 100
            ELSE round(100.0 * (rank() OVER (ORDER BY raw) - 1) / (count(*) OVER () - 1))::integer END AS percentile,
       provisional
  FROM trust_records;
DROP INDEX trust_records_raw_idx;
