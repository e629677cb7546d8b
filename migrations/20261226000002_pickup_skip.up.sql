-- Pickup can pass over turns the agent asked it to skip (`?skip=` on pickup): an agent that
-- just gave a turn back because its program failed on it backs off on that turn while it serves
-- the user's other turns. `parley_pickup` takes the list as a new argument
-- (`migrations/functions/parley_pickup.sql`); the old signature goes.
DROP FUNCTION IF EXISTS parley_pickup(bytea, uuid, interval, interval, text, text);
