ALTER TABLE delegations DROP COLUMN context_id;
