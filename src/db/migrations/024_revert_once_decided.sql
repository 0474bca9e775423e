-- A revert held for approval and then rejected, withdrawn or expired never ran: it no longer counts as its plan's
-- one revert, so the plan can be reverted again (docs/change-management.md). The unique index of migration 007
-- leaves such reverts out; src/alterations/reverts.ts holds the same rule (`REVERT_COUNTS`).
DROP INDEX alteration_plans_revert_of;
CREATE UNIQUE INDEX alteration_plans_revert_of ON alteration_plans (revert_of)
  WHERE revert_of IS NOT NULL AND NOT (status = 6 AND approval ->> 'state' IN ('Rejected', 'Withdrawn', 'Expired'));
