import type { Queryable } from '../db/pool.js';
import { NotFoundError } from '../errors.js';
import { JOB_STATUS } from './model.js';
import { readPlanAlterations } from './plan-store/index.js';
import { JOB_COLUMNS, jobLog, type JobRow } from './job-views.js';
import { decodeCursor, encodeCursor, type Page } from './plans.js';
import { verificationName } from './verification.js';
import type { InstanceChange } from './views.js';

/**
 * What happened to one instance: every job that touched it (a result written: Completed, Failed, Cancelled),
 * newest first, each with its plan's alteration types and its log. A job still Pending has not touched it. The
 * instance must be the tenant's (404 otherwise); its jobs are then of the tenant's plans, as plans alter only
 * their tenant's instances.
 */
export async function listInstanceChanges(
  db: Queryable,
  tenantKey: string,
  instanceId: string,
  q: { after?: string | undefined; limit: number },
): Promise<Page<InstanceChange>> {
  const owned = await db.query('SELECT 1 FROM workflow_instances WHERE id = $1 AND tenant_id = $2', [
    instanceId,
    tenantKey,
  ]);
  if (owned.rowCount === 0) throw new NotFoundError(`Workflow instance ${instanceId} not found`);
  const after = q.after === undefined ? undefined : (decodeCursor(q.after, ['id'])[0] as string);
  const { rows } = await db.query<JobRow>(
    `SELECT ${JOB_COLUMNS}
       FROM alteration_jobs j
      WHERE instance_id = $1 AND status <> ${JOB_STATUS.Pending} AND ($2::text IS NULL OR id < $2)
        -- Not a purged plan's, left to its week's partition until that goes (its sets went with it).
        AND EXISTS (SELECT 1 FROM alteration_job_sets s WHERE s.plan_id = j.plan_id)
      ORDER BY id DESC LIMIT $3`,
    [instanceId, after ?? null, q.limit + 1],
  );
  const page = rows.slice(0, q.limit);
  const plans = await readPlanAlterations(db, tenantKey, [...new Set(page.map((r) => r.plan_id))]);
  const items = page.flatMap((r) => {
    const plan = plans.get(r.plan_id);
    if (!plan) return [];
    return [
      {
        planId: r.plan_id,
        jobId: r.id,
        status: r.status,
        verification: verificationName(r.verification),
        alterationTypes: plan.revert_of ? ['Revert'] : [...new Set(plan.alterations.map((a) => a.type))],
        log: jobLog(r, plan),
        completedAt: r.completed_at?.toISOString() ?? null,
      },
    ];
  });
  return { items, nextCursor: rows.length > q.limit ? encodeCursor([page[page.length - 1]!.id]) : null };
}
