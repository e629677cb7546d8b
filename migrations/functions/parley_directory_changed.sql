-- Moves the directory's version (`directory_version.n`) once per transaction that changed
-- anything discovery and ranking read: capabilities, agents' status or owner, anonymous ids,
-- and trust records (only when what discovery reads of one changes: its raw score, or whether
-- it is provisional; a claim's end that leaves both as they were does not move it, so responds
-- do not contend on the version row for nothing). The triggers are deferred, so the one row is
-- locked only while the transaction commits, and a flag local to the transaction skips the
-- rows after the first.
CREATE OR REPLACE FUNCTION parley_directory_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('parley.directory_bumped', true) IS DISTINCT FROM 'y' THEN
        UPDATE directory_version SET n = nextval('directory_version_seq');
        PERFORM set_config('parley.directory_bumped', 'y', true);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS agents_directory_version ON agents;
CREATE CONSTRAINT TRIGGER agents_directory_version AFTER UPDATE OF status, owner_user_id OR DELETE ON agents
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION parley_directory_changed();

DROP TRIGGER IF EXISTS anonymous_ids_directory_version ON anonymous_ids;
CREATE CONSTRAINT TRIGGER anonymous_ids_directory_version AFTER INSERT OR UPDATE OR DELETE ON anonymous_ids
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION parley_directory_changed();

DROP TRIGGER IF EXISTS capabilities_directory_version ON capabilities;
CREATE CONSTRAINT TRIGGER capabilities_directory_version AFTER INSERT OR UPDATE OR DELETE ON capabilities
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION parley_directory_changed();

DROP TRIGGER IF EXISTS trust_records_directory_version ON trust_records;
CREATE CONSTRAINT TRIGGER trust_records_directory_version AFTER INSERT OR DELETE ON trust_records
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION parley_directory_changed();

DROP TRIGGER IF EXISTS trust_records_directory_version_update ON trust_records;
CREATE CONSTRAINT TRIGGER trust_records_directory_version_update AFTER UPDATE ON trust_records
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.raw IS DISTINCT FROM NEW.raw OR OLD.provisional IS DISTINCT FROM NEW.provisional)
    EXECUTE FUNCTION parley_directory_changed();
