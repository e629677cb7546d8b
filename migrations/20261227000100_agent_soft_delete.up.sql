-- Deleting an agent keeps its records.
--
-- An agent was deleted with its row, and every row referring to it went with it
-- (`ON DELETE CASCADE`): the delegation attempts addressed to it, the delegations it asked for,
-- its anonymous ids and its trust history. A live attempt vanished with no fallback (its
-- delegation stayed `request` for ever), and a delegation whose attempt vanished could no
-- longer be read (its record named an attempt that was gone).
--
-- Now a deleted agent's row stays, marked `deleted_at` (and `inactive`): its keys and
-- capabilities are deleted, so it can neither call nor be found or offered work, and every
-- record that names it stays whole. The service never deletes an agent's row; the foreign keys
-- keep their rules for rows deleted by hand.
ALTER TABLE agents ADD COLUMN deleted_at TIMESTAMPTZ;
COMMENT ON COLUMN agents.deleted_at IS
    'When its owner deleted it: its keys and capabilities are gone, its records stay; never active again.';
ALTER TABLE agents ADD CONSTRAINT agents_deleted_inactive CHECK (deleted_at IS NULL OR status = 'inactive');
