-- Storage settings for the tables a steady stream of turns and delegations keeps changing.
--
-- Small tables updated on every claim end or attempt end (one counter row per agent and day,
-- one trust record per agent, the sharded count of active tasks): none of the columns these
-- updates change is indexed, so each update can be a heap-only tuple on the same page, which
-- needs free room on that page. Half-full pages keep that room between vacuums, and each table
-- is vacuumed after a fixed number of dead rows rather than a share of a table that stays small.
ALTER TABLE agent_trust_days SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0,
                                  autovacuum_vacuum_threshold = 2000);
ALTER TABLE trust_records SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0,
                               autovacuum_vacuum_threshold = 2000);
ALTER TABLE task_counts SET (fillfactor = 20, autovacuum_vacuum_scale_factor = 0,
                             autovacuum_vacuum_threshold = 1000);

-- Tasks take two updates per turn cycle, delegations and their attempts two or three each: a
-- vacuum after 2 % of the rows are dead instead of PostgreSQL's default 20 %, so that a busy
-- table's dead versions are reclaimed in small, frequent passes.
ALTER TABLE tasks SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE delegations SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE delegation_attempts SET (autovacuum_vacuum_scale_factor = 0.02,
                                     autovacuum_analyze_scale_factor = 0.05);

-- The append-mostly logs (turns, events): vacuumed after 5 % new rows, so their visibility map
-- stays current and reads of them stay index-only where they can.
ALTER TABLE messages SET (autovacuum_vacuum_insert_scale_factor = 0.05);
ALTER TABLE events SET (autovacuum_vacuum_insert_scale_factor = 0.05);
