-- Keeps `trust_score_counts` (how many trust records have each raw score; every percentile is
-- read from it through `trust_score_ranks`) equal to the records: each record inserted or
-- deleted, or whose raw score changed, moves one count from its old score to its new one.
--
-- The triggers are deferred, so the counts change when the transaction commits, and only
-- then are their rows locked. Every change that fires them also moves the directory's version
-- (`parley_directory_changed`: a record inserted or deleted, or whose raw score changed), and
-- for one event the triggers run in the order of their names, `..._directory_version` before
-- `..._score_counted`: a commit that changes the counts already holds the version row, so such
-- commits are one at a time there and never wait on one another's counts, or take two of
-- them in opposite orders. The counts add no lock to any transaction.
--
-- Within a transaction that changed a record itself, the counts are those of the last commit
-- until it commits (a delegation's fallback, which ranks its next targets after its attempt
-- ended, sees the others' percentiles as committed; the one record it changed is the target
-- it is leaving).
CREATE OR REPLACE FUNCTION parley_trust_score_counted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE trust_score_counts SET n = n - 1 WHERE raw = OLD.raw;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO trust_score_counts AS c (raw, n) VALUES (NEW.raw, 1)
        ON CONFLICT (raw) DO UPDATE SET n = c.n + 1;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS trust_records_score_counted ON trust_records;
CREATE CONSTRAINT TRIGGER trust_records_score_counted AFTER INSERT OR DELETE ON trust_records
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION parley_trust_score_counted();

DROP TRIGGER IF EXISTS trust_records_score_counted_update ON trust_records;
CREATE CONSTRAINT TRIGGER trust_records_score_counted_update AFTER UPDATE ON trust_records
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (OLD.raw IS DISTINCT FROM NEW.raw)
    EXECUTE FUNCTION parley_trust_score_counted();

-- Counted afresh each time this file is applied (a new database, or a new text of it): the
-- records are held against writers until the start-up's definitions commit (as `CREATE
-- TRIGGER` holds them anyway), so no change falls between this count and the triggers.
LOCK TABLE trust_records IN SHARE ROW EXCLUSIVE MODE;
DELETE FROM trust_score_counts;
INSERT INTO trust_score_counts (raw, n) SELECT raw, count(*) FROM trust_records GROUP BY raw;
