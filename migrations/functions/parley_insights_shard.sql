-- Which of the eight insights shards an ending counts in, by the id of what ended (the
-- negotiation, or the opportunity of a decision or an expiry): the rows everyone's endings
-- update are spread over eight rows a day, so concurrent endings rarely wait on one lock.
CREATE OR REPLACE FUNCTION parley_insights_shard(id uuid) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (hashtext(id::text) & 7)::smallint
$$;
