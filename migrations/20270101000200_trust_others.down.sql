DROP FUNCTION IF EXISTS parley_trust_of(uuid);
DELETE FROM parley_definitions;
