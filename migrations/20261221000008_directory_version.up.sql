-- A version of everything discovery and ranking read (capabilities, agents' status and owner,
-- anonymous ids, trust records), so that a process can keep them in memory and know, with one
-- tiny read, whether what it holds is still the committed state.
--
-- `epoch` tells databases apart (a process may talk to several); `n` moves in every transaction
-- that changed any of those rows, once, when it commits: the triggers are deferred, so the one
-- row is locked only during the commit, and a flag local to the transaction skips the later rows.
-- `n` comes from a sequence, so a number seen inside a transaction that then rolls back is never
-- reused.

CREATE SEQUENCE directory_version_seq;

CREATE TABLE directory_version (
    one   BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    epoch UUID NOT NULL DEFAULT gen_random_uuid(),
    n     BIGINT NOT NULL
);
INSERT INTO directory_version (n) VALUES (nextval('directory_version_seq'));

CREATE FUNCTION parley_directory_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('parley.directory_bumped', true) IS DISTINCT FROM 'y' THEN
        UPDATE directory_version SET n = nextval('directory_version_seq');
        PERFORM set_config('parley.directory_bumped', 'y', true);
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER capabilities_directory_version AFTER INSERT OR UPDATE OR DELETE ON capabilities
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION parley_directory_changed();
CREATE CONSTRAINT TRIGGER agents_directory_version AFTER UPDATE OF status, owner_user_id OR DELETE ON agents
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION parley_directory_changed();
CREATE CONSTRAINT TRIGGER anonymous_ids_directory_version AFTER INSERT OR UPDATE OR DELETE ON anonymous_ids
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION parley_directory_changed();
CREATE CONSTRAINT TRIGGER trust_records_directory_version AFTER INSERT OR UPDATE OR DELETE ON trust_records
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION parley_directory_changed();
