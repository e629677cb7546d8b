-- The SQL one delegation round trip cannot avoid, as one pgbench transaction (run with
-- -M prepared; client n plays requester/target pair n of `delegation_floor_pairs`), through the
-- service's own functions with the values the service passes them:
-- - the delegate: the key check and the named target's capability read before the transaction
--   (the service checks the input against the capability's schema off the database, between
--   them and the transaction), then open and make in one transaction;
-- - one read of the target's inbox (the service's statement, page of 100);
-- - the accept;
-- - the complete (the output schema kept from the accept, so no read before it).
-- Left out, because the service's round trip can do without them or shares them: the inbox read
-- that finds nothing before the target's long-poll waits, the event log's batched reads, the
-- batched wake-up NOTIFYs, the throttled `last_seen_at` writes.
-- `-D default_limit=N`, `-D inbound_limit=N`, `-D per_requester=N`: the service's outbound and
-- inbound limits and its trust count per requester, which the functions take as it passes them.
SELECT auth, agent_id, owner_user_id FROM parley_agent_of_key((SELECT rhash FROM delegation_floor_pairs WHERE n = :client_id), NULL);
SELECT c.capability_id, c.input_schema
  FROM anonymous_ids i JOIN capabilities c ON c.agent_id = i.agent_id AND c.task_type = 'code-review' AND c.custom_type IS NULL
 WHERE i.anonymous_id = (SELECT tanon FROM delegation_floor_pairs WHERE n = :client_id);
BEGIN;
SELECT p.rhash, p.rid, p.thash, p.tid, p.tanon, g.req, g.did, g.task, o.next_seq,
       o.requester_anonymous_id AS ranon, o.capability_id AS cap, o.output_schema AS oschema
  FROM delegation_floor_pairs p
 CROSS JOIN (SELECT gen_random_uuid() AS req, gen_random_uuid() AS did, gen_random_uuid() AS task) g
 CROSS JOIN LATERAL parley_delegation_open(p.rhash, p.rid, g.req, p.tanon, 'code-review', NULL, :default_limit) o
 WHERE p.n = :client_id \gset
SELECT live, delegation_record
  FROM parley_delegation_make(:did, :req, :rid, 'code-review', NULL, '{"code": "fn main() {}"}', :tanon, 60000, true,
                              3, now(), :next_seq, :task, :tid, :tanon, :ranon, :cap, :oschema,
                              now() + interval '60 seconds', now() + interval '60 seconds', gen_random_uuid()::text,
                              :inbound_limit);
COMMIT;
SELECT k.auth, k.agent_id AS key_agent_id, k.owner_user_id AS key_owner_user_id,
       i.request_id, i.attempt, i.task_id, i.requester_anonymous_id, i.task_type, i.custom_type, i.input,
       i.timeout_ms, i.status, i.output, i.reason, i.created_at, i.deadline, i.delegation_id
  FROM parley_agent_of_key(:thash, :tid) k
  LEFT JOIN LATERAL (
      SELECT d.request_id, a.attempt, a.task_id, a.requester_anonymous_id, d.task_type, d.custom_type,
             d.input, d.timeout_ms, a.status, a.output, a.reason, a.created_at, a.deadline, d.delegation_id
        FROM delegation_attempts a JOIN delegations d ON d.delegation_id = a.delegation_id
       WHERE k.auth = 'ok' AND a.target_agent_id = k.agent_id AND a.status = 'request'
       ORDER BY a.created_at, a.delegation_id LIMIT 100) i ON true
 ORDER BY i.created_at, i.delegation_id;
SELECT * FROM parley_delegation_accept(:thash, :tid, :req, gen_random_uuid()::text);
SELECT * FROM parley_delegation_complete(:thash, :tid, :req, :did, 1, '{"feedback": "looks fine"}', :per_requester);
