-- A first capability brings its agent into the population.
CREATE OR REPLACE FUNCTION parley_trust_capabilities_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM parley_refresh_trust_records(ARRAY(
        SELECT DISTINCT n.agent_id FROM new_capabilities n
         WHERE NOT EXISTS (SELECT 1 FROM trust_records x WHERE x.agent_id = n.agent_id)
         ORDER BY n.agent_id));
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS capabilities_trust_added ON capabilities;
CREATE TRIGGER capabilities_trust_added AFTER INSERT ON capabilities
    REFERENCING NEW TABLE AS new_capabilities
    FOR EACH STATEMENT EXECUTE FUNCTION parley_trust_capabilities_added();
