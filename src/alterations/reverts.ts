import type { Queryable } from '../db/pool.js';
import { PLAN_STATUS } from './model.js';

/**
 * Whether a revert plan counts as its plan's one revert (SQL over `alteration_plans`): every revert but one held
 * for approval and then rejected, withdrawn or expired, which never ran. The unique index on `revert_of`
 * (migration 024) has the same condition.
 */
export const REVERT_COUNTS = `NOT (status = ${PLAN_STATUS.Cancelled} AND approval ->> 'state' IN ('Rejected', 'Withdrawn', 'Expired'))`;

/**
 * The plan that reverts `planId` in the tenant, or null (a plan is reverted at most once: a unique index on
 * `revert_of`, migrations 007 and 024). What a plan's page shows as "Reverted by".
 */
export async function revertingPlanId(db: Queryable, tenantKey: string, planId: string): Promise<string | null> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM alteration_plans WHERE revert_of = $1 AND tenant_id = $2 AND ${REVERT_COUNTS}`,
    [planId, tenantKey],
  );
  return rows[0]?.id ?? null;
}
