DROP FUNCTION parley_delegation_offer(uuid, integer, uuid, uuid, uuid, uuid, uuid, jsonb, timestamptz, timestamptz, timestamptz, text);
DROP FUNCTION parley_delegation_open(bytea, uuid, uuid, uuid, text, text, integer);
DROP FUNCTION parley_delegation_complete(bytea, uuid, uuid, integer, jsonb);
DROP FUNCTION parley_delegation_accept(bytea, uuid, uuid, text);
DROP FUNCTION parley_delegation_move(uuid, integer, text, text, jsonb, text, text, integer, text);
DROP FUNCTION parley_delegation_addressed(uuid, uuid);
