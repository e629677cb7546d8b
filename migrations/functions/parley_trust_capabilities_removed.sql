-- Its last capability gone and no recent record, an agent leaves it (only deletes here: the
-- agent itself may be being deleted).
CREATE OR REPLACE FUNCTION parley_trust_capabilities_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM trust_records x
     WHERE x.agent_id IN (SELECT agent_id FROM old_capabilities)
       AND NOT EXISTS (SELECT 1 FROM capabilities c WHERE c.agent_id = x.agent_id)
       AND NOT EXISTS (SELECT 1 FROM agent_trust_days t
                        WHERE t.agent_id = x.agent_id AND t.day > (now() AT TIME ZONE 'UTC')::date - 90);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS capabilities_trust_removed ON capabilities;
CREATE TRIGGER capabilities_trust_removed AFTER DELETE ON capabilities
    REFERENCING OLD TABLE AS old_capabilities
    FOR EACH STATEMENT EXECUTE FUNCTION parley_trust_capabilities_removed();
