-- An opportunity that expired before everyone decided counts in the insights of the UTC day it
-- expired, for everyone and for each of its two people, in the transaction that expires it.
CREATE OR REPLACE FUNCTION parley_insights_expired() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO insight_days AS d (scope, day, shard, expired)
    SELECT scope, (NEW.updated_at AT TIME ZONE 'UTC')::date, parley_insights_shard(NEW.opportunity_id), count(*)
      FROM unnest(ARRAY['', NEW.source_user_id, NEW.candidate_user_id]) AS scope
     GROUP BY scope
     ORDER BY scope
    ON CONFLICT (scope, day, shard) DO UPDATE SET expired = d.expired + EXCLUDED.expired;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS opportunities_expired_insights ON opportunities;
CREATE TRIGGER opportunities_expired_insights AFTER UPDATE OF status ON opportunities
    FOR EACH ROW WHEN (NEW.status = 'expired' AND OLD.status IS DISTINCT FROM 'expired')
    EXECUTE FUNCTION parley_insights_expired();
