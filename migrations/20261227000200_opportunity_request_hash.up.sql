-- What the platform's create request held, so that its `opportunityId` repeated with another
-- body is told apart from a retry (409 `opportunity_id_reused`): the SHA-256 of the request's
-- canonical JSON. NULL for opportunities made before it was kept; a repeat of those is a retry.
ALTER TABLE opportunities ADD COLUMN request_hash BYTEA;
