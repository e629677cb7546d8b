-- Who decided each turn. A system turn that stood in for a personal agent says why (the timer
-- that fired: `park_timeout` or `offline`; or the agent's `hand_back`), and every system turn
-- says how it was decided (`rules`, or `model:<name>` for the model-backed negotiator). An
-- agent's turn (`played_by = 'personal'`) has neither. Turns stored before this change read as
-- decided by the rules, and a fallback among them reads as a plain system turn.
--
-- The columns come without defaults and their checks `NOT VALID`, so adding them rewrites and
-- scans nothing: every existing row is NULL in both, which the checks allow.
ALTER TABLE messages ADD COLUMN fallback_reason TEXT, ADD COLUMN decided_by TEXT;
ALTER TABLE messages
    ADD CONSTRAINT messages_fallback_reason_check
        CHECK (fallback_reason IS NULL
               OR (fallback_reason IN ('park_timeout', 'offline', 'hand_back') AND played_by = 'system')) NOT VALID,
    ADD CONSTRAINT messages_decided_by_check
        CHECK (decided_by IS NULL
               OR ((decided_by = 'rules' OR decided_by LIKE 'model:_%') AND played_by = 'system')) NOT VALID;
