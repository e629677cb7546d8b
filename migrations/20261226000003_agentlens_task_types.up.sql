-- The task types of AgentLens's current clients beside the older list: `data-extraction`,
-- `classification`, `generation` and `transformation`.
ALTER TABLE capabilities DROP CONSTRAINT capabilities_task_type_check;
ALTER TABLE capabilities ADD CONSTRAINT capabilities_task_type_check
    CHECK (task_type IN ('code-review', 'code-generation', 'testing', 'documentation', 'analysis', 'summarization',
                         'translation', 'data-extraction', 'classification', 'generation', 'transformation',
                         'custom'));
