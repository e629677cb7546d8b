DROP TRIGGER trust_records_directory_version_update ON trust_records;
DROP TRIGGER trust_records_directory_version ON trust_records;
CREATE CONSTRAINT TRIGGER trust_records_directory_version AFTER INSERT OR UPDATE OR DELETE ON trust_records
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION parley_directory_changed();
