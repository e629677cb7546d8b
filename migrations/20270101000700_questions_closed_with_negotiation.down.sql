-- Development only: the function follows the newest schema; the next start applies every
-- definition again.
ALTER TABLE person_questions DROP CONSTRAINT person_questions_status_check;
ALTER TABLE person_questions ADD CONSTRAINT person_questions_status_check
    CHECK (status IN ('pending', 'answered', 'unanswered')) NOT VALID;
DROP FUNCTION IF EXISTS parley_pickup(bytea, uuid, interval, interval, text, text, uuid[]);
DELETE FROM parley_definitions;
