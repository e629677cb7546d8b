ALTER TABLE insight_days DROP COLUMN system_turns;
-- The insights functions name the column: apply every definition again at the next start.
DELETE FROM parley_definitions;
