-- A person's decision on an opportunity counts in the insights of the UTC day it was made, for
-- everyone and for that person, in the transaction that records it.
CREATE OR REPLACE FUNCTION parley_insights_decided() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO insight_days AS d (scope, day, shard, decisions_accepted, decisions_declined)
    SELECT scope, (NEW.decided_at AT TIME ZONE 'UTC')::date, parley_insights_shard(NEW.opportunity_id),
           (NEW.decision = 'accept')::int, (NEW.decision = 'decline')::int
      FROM unnest(ARRAY['', NEW.user_id]) AS scope
     ORDER BY scope
    ON CONFLICT (scope, day, shard) DO UPDATE
       SET decisions_accepted = d.decisions_accepted + EXCLUDED.decisions_accepted,
           decisions_declined = d.decisions_declined + EXCLUDED.decisions_declined;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS opportunity_decisions_insights ON opportunity_decisions;
CREATE TRIGGER opportunity_decisions_insights AFTER INSERT ON opportunity_decisions
    FOR EACH ROW EXECUTE FUNCTION parley_insights_decided();
