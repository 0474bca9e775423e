import type pg from 'pg';
import { type Queryable, withTransaction } from '../../db/pool.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import { PLAN_STATUS } from '../../vocabulary/plan.js';

/** Purging finished plans past their days (src/alterations/retention.ts), and what a purged plan answers. */

/** Completed, Failed, Cancelled: as SQL text, so that the partial index of migration 035 serves the sweep. */
const FINISHED_SQL = `(${PLAN_STATUS.Completed}, ${PLAN_STATUS.Failed}, ${PLAN_STATUS.Cancelled})`;

/** The 404 of a plan that is not there: "purged after n days" when the purge removed it. */
export async function planNotFound(db: Queryable, tenantKey: string, planId: string): Promise<NotFoundError> {
  const days = await purgedAfter(db, tenantKey, planId);
  return new NotFoundError(days === undefined ? `Plan ${planId} not found` : `This plan was purged after ${days} days`);
}

/** The 409 of a revert of a purged plan; undefined when the plan was never purged. */
export async function purgedRevertConflict(
  db: Queryable,
  tenantKey: string,
  planId: string,
): Promise<ConflictError | undefined> {
  const days = await purgedAfter(db, tenantKey, planId);
  return days === undefined
    ? undefined
    : new ConflictError(
        `Plan ${planId} was purged after ${days} days with its jobs and their before-images: nothing is left to revert`,
      );
}

async function purgedAfter(db: Queryable, tenantKey: string, planId: string): Promise<number | undefined> {
  const { rows } = await db.query<{ retention_days: number }>(
    'SELECT retention_days FROM purged_plans WHERE tenant_id = $1 AND id = $2',
    [tenantKey, planId],
  );
  return rows[0]?.retention_days;
}

/**
 * Finished plans past `days`, at most `perTenant` of each tenant (a tenant with a backlog takes no other's
 * turn), the latest finished first: a revert finishes after the plan it reverts, so it goes first. A plan a kept
 * revert names stays until that revert goes too.
 */
export async function expiredPlans(
  db: Queryable,
  days: number,
  perTenant: number,
): Promise<{ id: string; tenantKey: string }[]> {
  const { rows } = await db.query<{ id: string; tenant_id: string }>(
    `SELECT id, tenant_id FROM (
       SELECT p.id, p.tenant_id, p.completed_at,
              row_number() OVER (PARTITION BY p.tenant_id ORDER BY p.completed_at) AS k
         FROM alteration_plans p
        WHERE p.status IN ${FINISHED_SQL} AND p.completed_at < now() - make_interval(days => $1)
          AND NOT EXISTS (SELECT 1 FROM alteration_plans r
                           WHERE r.revert_of = p.id
                             AND NOT (r.status IN ${FINISHED_SQL} AND r.completed_at < now() - make_interval(days => $1)))
     ) e WHERE k <= $2 ORDER BY completed_at DESC`,
    [days, perTenant],
  );
  return rows.map((r) => ({ id: r.id, tenantKey: r.tenant_id }));
}

/**
 * Removes a plan with what is left of it (its job sets and batch counts), leaving its tombstone. Its job rows stay in
 * their week's partition, which goes whole when the last plan of its week has gone (src/alterations/job-partitions.ts):
 * no row of them is deleted here. Nothing reads them meanwhile: every read of jobs goes through their plan, an
 * instance's changes through their plan's sets, and the plan's id is never used again.
 */
export async function purgePlan(pool: pg.Pool, plan: { id: string; tenantKey: string }, days: number): Promise<void> {
  // The tombstone first: a revert asked for from now on is refused (its before-images are going).
  await pool.query(
    `INSERT INTO purged_plans (tenant_id, id, retention_days, purged_at) VALUES ($1, $2, $3, now())
     ON CONFLICT (tenant_id, id) DO UPDATE SET retention_days = EXCLUDED.retention_days, purged_at = now()`,
    [plan.tenantKey, plan.id, days],
  );
  await withTransaction(pool, async (client) => {
    // The plans' delete trigger (migration 036) leaves the jobs to their partition.
    await client.query("SET LOCAL wfa.keep_jobs = 'on'");
    // Its job sets and batch counts go with it (ON DELETE CASCADE).
    await client.query('DELETE FROM alteration_plans WHERE id = $1 AND tenant_id = $2', [plan.id, plan.tenantKey]);
  });
}
