-- A delegation and its attempts (first first) as one JSON value, each row as its columns:
-- `{"delegation": {...}, "attempts": [{...}, ...]}` (`[]` when none is left: attempts removed by
-- hand, or with an agent deleted before deletion kept records); NULL for an unknown delegation.
CREATE OR REPLACE FUNCTION parley_delegation_record(p_delegation uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_build_object('delegation', to_jsonb(d), 'attempts',
                       (SELECT coalesce(jsonb_agg(to_jsonb(a) ORDER BY a.attempt), '[]'::jsonb)
                          FROM delegation_attempts a WHERE a.delegation_id = d.delegation_id))
              FROM delegations d WHERE d.delegation_id = p_delegation);
END
$$;
