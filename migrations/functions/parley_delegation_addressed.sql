-- The delegation of `p_request` whose newest attempt addressed to `p_target` is the newest of
-- all (several requesters may use one request id); NULL when none was ever addressed to it.
-- Written to be read from the delegations of the request id (usually one) to their attempts by
-- primary key: a generic plan of the earlier form walked every attempt ever addressed to the
-- target, newest first, looking for one of them.
CREATE OR REPLACE FUNCTION parley_delegation_addressed(p_target uuid, p_request uuid) RETURNS uuid
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT d.delegation_id FROM delegations d
             CROSS JOIN LATERAL (SELECT a.created_at, a.attempt FROM delegation_attempts a
                                  WHERE a.delegation_id = d.delegation_id AND a.target_agent_id = p_target
                                  ORDER BY a.attempt DESC LIMIT 1) a
             WHERE d.request_id = p_request
             ORDER BY a.created_at DESC, a.attempt DESC, d.delegation_id DESC LIMIT 1);
END
$$;
