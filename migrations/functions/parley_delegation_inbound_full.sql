-- Whether `p_target` received `p_limit` counted attempts in the last 60 s: its newest rank,
-- then the `p_limit`-th newest attempt's time.
CREATE OR REPLACE FUNCTION parley_delegation_inbound_full(p_target uuid, p_limit integer) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_seq bigint;
BEGIN
    IF p_limit <= 0 THEN
        RETURN true;
    END IF;
    SELECT a.target_seq INTO v_seq FROM delegation_attempts a
     WHERE a.target_agent_id = p_target AND a.target_seq IS NOT NULL ORDER BY a.target_seq DESC LIMIT 1;
    IF coalesce(v_seq, 0) < p_limit THEN
        RETURN false;
    END IF;
    RETURN (SELECT a.created_at > now() - interval '60 seconds' FROM delegation_attempts a
             WHERE a.target_agent_id = p_target AND a.target_seq = v_seq - p_limit + 1);
END
$$;
