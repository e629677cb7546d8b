-- What a new delegation reads first, under its requester's lock (held to the end of the
-- transaction, so that one requester's delegations count each other exactly and a second
-- request with the same id sees the first), authentication included. `auth` as
-- `parley_agent_of_key` says it for any agent of the key; `own` is false when `p_agent` (the
-- body's `agentId`, when it gives one) is not the key's agent. Then: the delegation this
-- request id already made (`existing`), or `taken` when another requester made it (a request
-- id belongs to its first requester; nothing else about it is read); the outbound window
-- (`p_default_limit`, the service's limit, or a lower one that one of the requester's
-- capabilities declares; whether that many were sent in the last 60 s, and then when the
-- oldest of them leaves the window); the rank and the earliest time (`next_seq`,
-- `not_before`) the new delegation takes; the named target `p_target` resolved
-- (`target_agent_id`, and whether that anonymous id is `target_live`) with what it offers for
-- the kind of work (as `store::target_offer` reads it); and the requester's current anonymous
-- id, when it has one that has not expired.
CREATE OR REPLACE FUNCTION parley_delegation_open(
    p_key_hash bytea, p_agent uuid, p_request uuid, p_target uuid, p_task_type text, p_custom_type text,
    p_default_limit integer
) RETURNS TABLE (
    auth text, key_agent_id uuid, key_owner_user_id text, own boolean, existing uuid, taken boolean,
    outbound_limit integer, window_full boolean, frees_at timestamptz, next_seq bigint, not_before timestamptz,
    target_agent_id uuid, target_live boolean, target_active boolean, capability_id uuid,
    input_schema jsonb, output_schema jsonb, enabled boolean, accept_delegations boolean,
    requester_anonymous_id uuid
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_seq bigint;
BEGIN
    SELECT k.auth, k.agent_id, k.owner_user_id INTO auth, key_agent_id, key_owner_user_id
      FROM parley_agent_of_key(p_key_hash, NULL) k;
    own := p_agent IS NULL OR key_agent_id = p_agent;
    IF auth <> 'ok' OR NOT own THEN
        RETURN NEXT;
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('delegation-outbound:' || key_agent_id, 0));
    SELECT x.delegation_id, x.requester_agent_id <> key_agent_id INTO existing, taken FROM delegations x
     WHERE x.request_id = p_request;
    IF taken THEN
        existing := NULL;
    END IF;
    IF existing IS NOT NULL OR taken THEN
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT least(p_default_limit, min(c.outbound_rate_limit)) INTO outbound_limit
      FROM capabilities c WHERE c.agent_id = key_agent_id;
    -- The requester's newest delegation, then its `outbound_limit`-th newest: the window is full
    -- while that one is in it, and frees up when it leaves.
    SELECT x.requester_seq, x.created_at INTO v_seq, not_before FROM delegations x
     WHERE x.requester_agent_id = key_agent_id ORDER BY x.requester_seq DESC LIMIT 1;
    next_seq := coalesce(v_seq, 0) + 1;
    IF outbound_limit <= 0 THEN
        window_full := true;
    ELSIF coalesce(v_seq, 0) < outbound_limit THEN
        window_full := false;
    ELSE
        SELECT x.created_at + interval '60 seconds' INTO frees_at FROM delegations x
         WHERE x.requester_agent_id = key_agent_id AND x.requester_seq = v_seq - outbound_limit + 1;
        window_full := frees_at > now();
    END IF;
    IF p_target IS NOT NULL THEN
        SELECT i.agent_id, i.current AND i.expires_at > now() INTO target_agent_id, target_live
          FROM anonymous_ids i WHERE i.anonymous_id = p_target;
        SELECT a.status = 'active', c.capability_id, c.input_schema, c.output_schema,
               coalesce(c.enabled, false), coalesce(c.accept_delegations, false)
          INTO target_active, capability_id, input_schema, output_schema, enabled, accept_delegations
          FROM agents a
          LEFT JOIN capabilities c
            ON c.agent_id = a.agent_id AND c.task_type = p_task_type AND c.custom_type IS NOT DISTINCT FROM p_custom_type
         WHERE a.agent_id = target_agent_id;
    END IF;
    SELECT i.anonymous_id INTO requester_anonymous_id FROM anonymous_ids i
     WHERE i.agent_id = key_agent_id AND i.current AND i.expires_at > now();
    RETURN NEXT;
END
$$;
