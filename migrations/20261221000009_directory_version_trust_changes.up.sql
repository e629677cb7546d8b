-- Every claim that ends rewrites its agent's trust record, and moving the directory's version on
-- each of those would put one contended row update into every respond and throw away the
-- in-memory snapshots while turns flow. Discovery and ranking read only two things from a
-- record: `raw` (and the percentiles ranked from it) and whether `events` is below 10 (the
-- provisional flag, `trust::PROVISIONAL_BELOW` in the code). An update that changes neither
-- leaves every answer as it was, so only the others move the version.

DROP TRIGGER trust_records_directory_version ON trust_records;

CREATE CONSTRAINT TRIGGER trust_records_directory_version AFTER INSERT OR DELETE ON trust_records
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION parley_directory_changed();
CREATE CONSTRAINT TRIGGER trust_records_directory_version_update AFTER UPDATE ON trust_records
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.raw IS DISTINCT FROM NEW.raw OR (OLD.events < 10) IS DISTINCT FROM (NEW.events < 10))
    EXECUTE FUNCTION parley_directory_changed();
