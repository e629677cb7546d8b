-- The insights count the turns Parley played for a person who has no personal agent, beside the
-- turns it played standing in for a person's agent (`fallbacks`): a person without an agent
-- reads how many of their turns Parley decided, as every one of their turns says. Counted from
-- this change on; the days before it show 0.
ALTER TABLE insight_days ADD COLUMN system_turns BIGINT NOT NULL DEFAULT 0;
