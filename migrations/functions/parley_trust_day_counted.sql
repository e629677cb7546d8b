-- An agent's stored trust record follows its counters: every claim and every delegation attempt
-- that ends (and counts) upserts one `agent_trust_days` row, and this row trigger recomputes
-- that agent's record by the definition of `parley_trust_scores` (same formulas, same
-- rounding): one aggregate over its last 90 days, the owners its counted attempts came from,
-- and one upsert, all planned once per connection by PL/pgSQL (a SQL-language function over a
-- transition table would be planned afresh on every call, which once cost a quarter of a turn
-- cycle). A counter row is always today's, so the agent is always in the trust population.
CREATE OR REPLACE FUNCTION parley_trust_day_counted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    v_owners bigint;
    today date := (now() AT TIME ZONE 'UTC')::date;
BEGIN
    SELECT coalesce(avg(parley_trust_day_share(t)) FILTER (WHERE t.day > today - 30) * 100, 50) AS health,
           coalesce(sum(t.attempts_completed + t.attempts_unfinished), 0) AS finished,
           coalesce(sum(t.attempts_completed), 0) AS completed,
           coalesce(sum(t.claims_answered + t.claims_expired + t.attempts_completed + t.attempts_unfinished), 0)::bigint
               AS events,
           max(t.updated_at) AS updated_at,
           count(*) AS days
      INTO r
      FROM agent_trust_days t
     WHERE t.agent_id = NEW.agent_id AND t.day > today - 90;
    IF r.days = 0 THEN
        -- A row written for a day more than 90 days back (never by Parley itself): the full
        -- refresh decides whether the agent stays in the population.
        PERFORM parley_refresh_trust_records(ARRAY[NEW.agent_id]);
        RETURN NULL;
    END IF;
    SELECT count(DISTINCT q.requester_owner_id) INTO v_owners FROM trust_requester_days q
     WHERE q.target_agent_id = NEW.agent_id AND q.day > today - 90;
    INSERT INTO trust_records AS x (agent_id, health, raw, events, updated_at, as_of, provisional)
    VALUES (NEW.agent_id, r.health,
            round(0.6 * r.health
                  + 0.4 * CASE WHEN r.finished > 0 THEN 100 * r.completed::numeric / r.finished ELSE 50 END, 2),
            r.events, r.updated_at, today, parley_trust_provisional(r.finished, v_owners))
    ON CONFLICT (agent_id) DO UPDATE
       SET health = EXCLUDED.health, raw = EXCLUDED.raw, events = EXCLUDED.events,
           updated_at = EXCLUDED.updated_at, as_of = EXCLUDED.as_of, provisional = EXCLUDED.provisional;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS agent_trust_days_counted ON agent_trust_days;
CREATE TRIGGER agent_trust_days_counted AFTER INSERT OR UPDATE ON agent_trust_days
    FOR EACH ROW EXECUTE FUNCTION parley_trust_day_counted();
