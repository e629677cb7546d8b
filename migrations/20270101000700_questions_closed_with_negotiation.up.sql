-- A person's question closes with its negotiation: a negotiation that ends while its person is
-- asked (cancelled, timed out, or ended by the other side's turn) marks the pending question
-- `withdrawn` in the transaction that ends it (`src/delivery/finalize.rs`), so that no question
-- of an ended negotiation stays `pending`. Questions left pending by endings before this
-- migration stay as they are (no row is rewritten here); every read of pending questions
-- already passes over those of ended negotiations.
ALTER TABLE person_questions DROP CONSTRAINT person_questions_status_check;
ALTER TABLE person_questions ADD CONSTRAINT person_questions_status_check
    CHECK (status IN ('pending', 'answered', 'unanswered', 'withdrawn')) NOT VALID;

-- The answers a pickup carries (`context.personAnswers`) are read by the pickup's own statement
-- (`migrations/functions/parley_pickup.sql` returns them as a new column): the function's
-- result type changes, so the old one goes.
DROP FUNCTION IF EXISTS parley_pickup(bytea, uuid, interval, interval, text, text, uuid[]);
