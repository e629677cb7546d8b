-- Development only: capabilities of the four newer task types go with them.
DELETE FROM capabilities WHERE task_type IN ('data-extraction', 'classification', 'generation', 'transformation');
ALTER TABLE capabilities DROP CONSTRAINT capabilities_task_type_check;
ALTER TABLE capabilities ADD CONSTRAINT capabilities_task_type_check
    CHECK (task_type IN ('code-review', 'code-generation', 'testing', 'documentation', 'analysis', 'summarization',
                         'translation', 'custom'));
