-- The key verdict, decided here and nowhere else: the agent an API key speaks for, and whether
-- it may act as `p_agent` (NULL: as itself). `auth` is `unknown_key` (unknown, or a key that no
-- longer works: `parley_key_works`), `other_agent` (the key is another agent's), `inactive` or
-- `ok`. Always one row. Every route reads it: the turn and delegation statements in place, the
-- others through `store::agents::key_verdict`; Rust only words the answer (`KeyCheck::identity`).
-- (LANGUAGE sql on purpose: a STABLE set-returning SQL function is inlined into the calling
-- query when it is planned, so it costs nothing per call.)
CREATE OR REPLACE FUNCTION parley_agent_of_key(p_key_hash bytea, p_agent uuid)
RETURNS TABLE (auth text, agent_id uuid, owner_user_id text)
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN a.agent_id IS NULL THEN 'unknown_key'
                WHEN p_agent IS NOT NULL AND p_agent <> a.agent_id THEN 'other_agent'
                WHEN a.status <> 'active' THEN 'inactive'
                ELSE 'ok' END,
           a.agent_id, a.owner_user_id
      FROM (SELECT 1) one
      LEFT JOIN (api_keys k JOIN agents a ON a.agent_id = k.agent_id)
        ON k.key_hash = p_key_hash AND parley_key_works(k.revoked_at, k.expires_at)
$$;
