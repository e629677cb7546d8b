-- Development only: the function follows the newest schema; the next start applies every
-- definition again.
DROP FUNCTION IF EXISTS parley_pickup(bytea, uuid, interval, interval, text, text, uuid[]);
DELETE FROM parley_definitions;
