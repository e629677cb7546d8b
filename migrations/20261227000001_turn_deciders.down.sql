ALTER TABLE messages DROP COLUMN fallback_reason, DROP COLUMN decided_by;
