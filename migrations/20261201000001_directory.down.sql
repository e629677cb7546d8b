DROP FUNCTION IF EXISTS parley_trust_scores(uuid);
DROP TRIGGER IF EXISTS tasks_claim_end ON tasks;
DROP FUNCTION IF EXISTS parley_count_claim_end();
DROP TABLE IF EXISTS agent_trust_days;
DROP TABLE IF EXISTS anonymous_ids;
DROP TABLE IF EXISTS capabilities;
