-- Development only: removes everything the baseline made, and every function of
-- `migrations/functions/` (applied again, with the tables, by the next migration).
DROP VIEW trust_percentiles;
DROP TABLE delegation_attempts, delegations, trust_records, agent_trust_days, anonymous_ids, capabilities,
           directory_version, events, opportunity_decisions, artifacts, messages, task_counts, tasks, api_keys,
           agents, conversation_participants, conversations, opportunities, parley_definitions CASCADE;
DROP SEQUENCE directory_version_seq;
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = 'public' AND p.proname LIKE 'parley\_%'
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END
$$;
