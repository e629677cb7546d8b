-- The insights' bucket of a duration in seconds: 0 below a millisecond, else quarter octaves of
-- milliseconds (bucket b holds [2^((b-1)/4), 2^(b/4)) ms), so that a median read from the
-- buckets is within a fifth of the true one.
CREATE OR REPLACE FUNCTION parley_insights_bucket(seconds double precision) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN seconds IS NULL OR seconds * 1000 < 1 THEN 0
                ELSE floor(4 * ln(seconds * 1000) / ln(2))::integer + 1 END
$$;
