-- When each personal agent was last seen: any call it authenticates (pickup, respond, extend,
-- release, MCP, the heartbeat) marks it. The service writes it at most once per 15 s per agent
-- (a throttle in the process), never on every call. NULL: never seen since this column exists.
-- An agent is live when seen within PARLEY_AGENT_LIVENESS; a turn parked for a user with no live
-- agent falls back to the system negotiator after the shorter offline window.
ALTER TABLE agents ADD COLUMN last_seen_at TIMESTAMPTZ;
