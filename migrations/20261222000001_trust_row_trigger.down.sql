DROP TRIGGER agent_trust_days_counted ON agent_trust_days;
DROP FUNCTION parley_trust_day_counted();
CREATE FUNCTION parley_trust_days_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM parley_refresh_trust_records(ARRAY(SELECT DISTINCT agent_id FROM changed_days ORDER BY agent_id));
    RETURN NULL;
END
$$;
CREATE TRIGGER agent_trust_days_inserted AFTER INSERT ON agent_trust_days
    REFERENCING NEW TABLE AS changed_days
    FOR EACH STATEMENT EXECUTE FUNCTION parley_trust_days_changed();
CREATE TRIGGER agent_trust_days_updated AFTER UPDATE ON agent_trust_days
    REFERENCING NEW TABLE AS changed_days
    FOR EACH STATEMENT EXECUTE FUNCTION parley_trust_days_changed();
