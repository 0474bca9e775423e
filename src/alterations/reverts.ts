import type { Queryable } from '../db/pool.js';

/**
 * The plan that reverts `planId` in the tenant, or null (a plan is reverted at most once: a unique index on
 * `revert_of`, migration 007). What a plan's page shows as "Reverted by".
 */
export async function revertingPlanId(db: Queryable, tenantKey: string, planId: string): Promise<string | null> {
  const { rows } = await db.query<{ id: string }>(
    'SELECT id FROM alteration_plans WHERE revert_of = $1 AND tenant_id = $2',
    [planId, tenantKey],
  );
  return rows[0]?.id ?? null;
}
