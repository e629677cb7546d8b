DROP TRIGGER IF EXISTS trust_records_directory_version ON trust_records;
DROP TRIGGER IF EXISTS anonymous_ids_directory_version ON anonymous_ids;
DROP TRIGGER IF EXISTS agents_directory_version ON agents;
DROP TRIGGER IF EXISTS capabilities_directory_version ON capabilities;
DROP FUNCTION IF EXISTS parley_directory_changed();
DROP TABLE IF EXISTS directory_version;
DROP SEQUENCE IF EXISTS directory_version_seq;
