-- Parley as an A2A router: the skills agents offer, and where each plain message went.
--
-- `agent_skills`: one row per skill an agent offers: the skills of its AgentCard (kept in step
-- with the card: replaced whenever the card is stored, removed with it), or declared by a polling
-- agent. `search` is the skill's text for PostgreSQL's full-text ranking (name and tags weigh
-- most, then the description, then the examples), written with the row.
CREATE TABLE agent_skills (
    agent_id      UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    skill_id      TEXT NOT NULL CHECK (length(skill_id) BETWEEN 1 AND 200),
    name          TEXT NOT NULL CHECK (length(name) <= 200),
    description   TEXT NOT NULL CHECK (length(description) <= 2000),
    tags          TEXT[] NOT NULL DEFAULT '{}',
    examples      TEXT[] NOT NULL DEFAULT '{}',
    input_modes   TEXT[] NOT NULL DEFAULT '{}',
    output_modes  TEXT[] NOT NULL DEFAULT '{}',
    -- `card` (from the agent's AgentCard) or `declared` (by a polling agent).
    source        TEXT NOT NULL CHECK (source IN ('card', 'declared')),
    search        TSVECTOR NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, skill_id)
);
CREATE INDEX agent_skills_search_idx ON agent_skills USING gin (search);
COMMENT ON TABLE agent_skills IS
    'The skills agents offer (from their AgentCard, or declared): what plain A2A messages are routed to.';

-- `a2a_routes`: a task (or a context) a plain message started at a target agent, for the
-- requester that sent it: the requester's next message on that task or context, and its reads,
-- cancels and subscriptions, go to the same target.
CREATE TABLE a2a_routes (
    requester_agent_id  UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    -- The target's task id (a Message answer starts none: then the message id).
    task_id             TEXT NOT NULL CHECK (length(task_id) BETWEEN 1 AND 500),
    context_id          TEXT CHECK (length(context_id) <= 500),
    target_agent_id     UUID NOT NULL REFERENCES agents ON DELETE CASCADE,
    skill_id            TEXT NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (requester_agent_id, task_id)
);
CREATE INDEX a2a_routes_context_idx ON a2a_routes (requester_agent_id, context_id);
CREATE INDEX a2a_routes_target_idx ON a2a_routes (target_agent_id);
COMMENT ON TABLE a2a_routes IS
    'Where a plain A2A message was routed: the target''s task for the requester, so that the task''s next calls reach it.';
