-- The end of a claim counts for or against its holder: a respond (the turn count grew), an
-- expiry (the claim had lapsed) or a release. One upsert, in the transaction that ends the
-- claim; a claim ended because the negotiation itself ended (cancelled, deadline) counts for
-- nothing. A lapsed claim also counts in the insights of the day, for everyone and for the
-- agent's owner (in the shard of its negotiation, as the negotiation's own ending would).
CREATE OR REPLACE FUNCTION parley_count_claim_end() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    answered integer := 0;
    expired integer := 0;
    released integer := 0;
BEGIN
    IF OLD.claim_agent_id IS NULL THEN
        RETURN NULL;
    END IF;
    IF NEW.turn_count > OLD.turn_count THEN
        answered := 1;
    ELSIF OLD.claim_expires_at <= clock_timestamp() THEN
        expired := 1;
    ELSIF NEW.state = 'waiting_for_agent' THEN
        released := 1;
    ELSE
        RETURN NULL;
    END IF;
    INSERT INTO agent_trust_days AS d (agent_id, day, claims_answered, claims_expired, claims_released)
    VALUES (OLD.claim_agent_id, (now() AT TIME ZONE 'UTC')::date, answered, expired, released)
    ON CONFLICT (agent_id, day) DO UPDATE
       SET claims_answered = d.claims_answered + EXCLUDED.claims_answered,
           claims_expired = d.claims_expired + EXCLUDED.claims_expired,
           claims_released = d.claims_released + EXCLUDED.claims_released,
           updated_at = now();
    IF expired = 1 THEN
        INSERT INTO insight_days AS d (scope, day, shard, claim_expiries)
        SELECT scope, (now() AT TIME ZONE 'UTC')::date, parley_insights_shard(OLD.task_id), 1
          FROM (SELECT '' AS scope
                UNION
                SELECT owner_user_id FROM agents WHERE agent_id = OLD.claim_agent_id) s
         ORDER BY scope
        ON CONFLICT (scope, day, shard) DO UPDATE SET claim_expiries = d.claim_expiries + 1;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS tasks_claim_end ON tasks;
CREATE TRIGGER tasks_claim_end AFTER UPDATE OF state ON tasks
    FOR EACH ROW WHEN (OLD.state = 'claimed' AND NEW.state <> 'claimed')
    EXECUTE FUNCTION parley_count_claim_end();
