-- The A2A context a delegation was asked in: the `contextId` of the message that made it
-- (any string a client chose), NULL when it gave none or the delegation came another way; its
-- A2A task then names the delegation's own id as its context.
ALTER TABLE delegations ADD COLUMN context_id text;
