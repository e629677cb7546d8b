-- Every agent with a capability has a current anonymous id row: a first capability that
-- arrives without one gets one issued already expired, so that its first real use replaces it
-- (see `src/directory/anonymity.rs`). A discovery then only has to look for current ids that
-- expired instead of refreshing every agent it may show.
CREATE OR REPLACE FUNCTION parley_issue_placeholder_ids() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO anonymous_ids (anonymous_id, agent_id, expires_at)
    SELECT gen_random_uuid(), n.agent_id, now()
      FROM (SELECT DISTINCT agent_id FROM new_capabilities ORDER BY agent_id) n
     WHERE NOT EXISTS (SELECT 1 FROM anonymous_ids x WHERE x.agent_id = n.agent_id AND x.current)
    ON CONFLICT (agent_id) WHERE current DO NOTHING;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS capabilities_anonymous_ids ON capabilities;
CREATE TRIGGER capabilities_anonymous_ids AFTER INSERT ON capabilities
    REFERENCING NEW TABLE AS new_capabilities
    FOR EACH STATEMENT EXECUTE FUNCTION parley_issue_placeholder_ids();
