-- One day's share for trust's health, from an `agent_trust_days` row: of the claims the agent
-- answered or let expire and the delegation attempts it accepted, the share it answered or
-- completed in time; NULL for a day without any, so that `avg` passes the day over (and for
-- the NULL row of an outer join). The one place the formula is written: `parley_trust_scores`,
-- `parley_refresh_trust_records` and `parley_trust_day_counted` all average it. A plain SQL
-- expression, so the planner inlines it into each of them.
CREATE OR REPLACE FUNCTION parley_trust_day_share(p_day agent_trust_days) RETURNS numeric
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN (p_day).claims_answered + (p_day).claims_expired
                     + (p_day).accepted_completed + (p_day).accepted_unfinished > 0
                THEN ((p_day).claims_answered + (p_day).accepted_completed)::numeric
                     / ((p_day).claims_answered + (p_day).claims_expired
                        + (p_day).accepted_completed + (p_day).accepted_unfinished) END
$$;
