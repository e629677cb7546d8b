-- A requester's share of a target's inbound window in two index reads, however full the window.
--
-- One requesting owner may hold at most half of a target's inbound window. Counting that
-- owner's attempts in the window read every one of them, so an offer to a busy target cost
-- time in proportion to its traffic. Each ranked attempt now also carries its requesting owner
-- and that owner's own rank at the target (`owner_seq`, 1, 2, ... per target and owner, given
-- with `target_seq` under the target's lock). Ranks and times only grow together, so the owner
-- holds its share of the window exactly when its share-th newest rank is still in the window:
-- one lookup, as `parley_delegation_inbound_full` does for the window itself.
ALTER TABLE delegation_attempts
    ADD COLUMN requester_owner_id TEXT,
    ADD COLUMN owner_seq BIGINT;
COMMENT ON COLUMN delegation_attempts.requester_owner_id IS
    'The user who owns the requesting agent, for a ranked attempt (one that took a place in its target''s window).';
COMMENT ON COLUMN delegation_attempts.owner_seq IS
    'The requesting owner''s own rank among the attempts its agents made to this target (1, 2, ...), for a ranked attempt.';

UPDATE delegation_attempts a
   SET requester_owner_id = r.owner_id, owner_seq = r.n
  FROM (SELECT x.delegation_id, x.attempt, g.owner_user_id AS owner_id,
               row_number() OVER (PARTITION BY x.target_agent_id, g.owner_user_id ORDER BY x.target_seq) AS n
          FROM delegation_attempts x
          JOIN delegations d ON d.delegation_id = x.delegation_id
          JOIN agents g ON g.agent_id = d.requester_agent_id
         WHERE x.target_seq IS NOT NULL) r
 WHERE a.delegation_id = r.delegation_id AND a.attempt = r.attempt;

CREATE UNIQUE INDEX delegation_attempts_owner_seq_key
    ON delegation_attempts (target_agent_id, requester_owner_id, owner_seq) WHERE owner_seq IS NOT NULL;
