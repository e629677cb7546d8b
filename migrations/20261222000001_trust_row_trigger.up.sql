-- An agent's trust record follows its counters with a row trigger instead of a statement trigger.
--
-- Every claim that ends (each turn a personal agent answers) and every delegation attempt that
-- ends upserts one `agent_trust_days` row. The statement trigger this replaces called
-- `parley_refresh_trust_records`, a SQL-language function over a transition table that
-- PostgreSQL plans afresh on every call: about 0.65 ms of server CPU per claim end, a quarter of a
-- turn cycle's. A counter row is always today's, so the agent it names is always in the trust
-- population (it has a record): the refresh reduces to one aggregate over that agent's last 90
-- days and one upsert of its record, both planned once per connection by PL/pgSQL. The result
-- is the same row `parley_refresh_trust_records` writes (same formulas, same rounding); that
-- function stays for the other writers (a first capability, the daily roll).
CREATE FUNCTION parley_trust_day_counted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    today date := (now() AT TIME ZONE 'UTC')::date;
BEGIN
    SELECT coalesce(avg((t.claims_answered + t.accepted_completed)::numeric
                        / (t.claims_answered + t.claims_expired + t.accepted_completed + t.accepted_unfinished))
                        FILTER (WHERE t.day > today - 30
                                  AND t.claims_answered + t.claims_expired + t.accepted_completed
                                      + t.accepted_unfinished > 0)
                        * 100, 50) AS health,
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
    INSERT INTO trust_records AS x (agent_id, health, raw, events, updated_at, as_of)
    VALUES (NEW.agent_id, r.health,
            round(0.6 * r.health
                  + 0.4 * CASE WHEN r.finished > 0 THEN 100 * r.completed::numeric / r.finished ELSE 50 END, 2),
            r.events, r.updated_at, today)
    ON CONFLICT (agent_id) DO UPDATE
       SET health = EXCLUDED.health, raw = EXCLUDED.raw, events = EXCLUDED.events,
           updated_at = EXCLUDED.updated_at, as_of = EXCLUDED.as_of;
    RETURN NULL;
END
$$;

DROP TRIGGER agent_trust_days_inserted ON agent_trust_days;
DROP TRIGGER agent_trust_days_updated ON agent_trust_days;
DROP FUNCTION parley_trust_days_changed();
CREATE TRIGGER agent_trust_days_counted AFTER INSERT OR UPDATE ON agent_trust_days
    FOR EACH ROW EXECUTE FUNCTION parley_trust_day_counted();
