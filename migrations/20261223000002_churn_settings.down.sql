ALTER TABLE events RESET (autovacuum_vacuum_insert_scale_factor);
ALTER TABLE messages RESET (autovacuum_vacuum_insert_scale_factor);
ALTER TABLE delegation_attempts RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE delegations RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE tasks RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE task_counts RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE trust_records RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE agent_trust_days RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
