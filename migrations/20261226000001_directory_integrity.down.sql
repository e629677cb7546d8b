-- Development only (the functions of `migrations/functions/` follow the newest schema). The
-- trigger that reads `trust_records.provisional` goes with the column; clearing the checksums
-- has the next start apply every definition again.
DROP TRIGGER IF EXISTS trust_records_directory_version_update ON trust_records;
DELETE FROM parley_definitions;
DROP INDEX delegation_attempts_open_idx;
DROP VIEW trust_percentiles;
CREATE VIEW trust_percentiles AS
SELECT agent_id, raw, events,
       CASE WHEN count(*) OVER () <= 1 THEN 100
            ELSE round(100.0 * (rank() OVER (ORDER BY raw) - 1) / (count(*) OVER () - 1))::integer END AS percentile
  FROM trust_records;
ALTER TABLE trust_records DROP COLUMN provisional;
DROP TABLE trust_requester_days;
ALTER TABLE delegation_attempts DROP COLUMN counted, DROP COLUMN short_timeout;
ALTER TABLE delegations DROP CONSTRAINT delegations_request_id_key;
ALTER TABLE delegations ADD CONSTRAINT delegations_request_key UNIQUE (requester_agent_id, request_id);
CREATE INDEX delegations_request_idx ON delegations (request_id);
