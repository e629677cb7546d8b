-- `parley_trust_of` also answers how many other agents an agent's percentile compares it with,
-- so that an agent alone is not read as "higher than 100% of agents": its result type changes,
-- which CREATE OR REPLACE cannot do. The definition is applied again after the migrations.
DROP FUNCTION IF EXISTS parley_trust_of(uuid);
