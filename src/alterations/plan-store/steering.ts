import type pg from 'pg';
import type { Queryable } from '../../db/pool.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import {
  isFinished,
  PLAN_STATUS,
  type PlanStatus,
  planStatusName,
  type PrincipalRef,
  UNFINISHED_STATUSES,
} from '../../vocabulary/plan.js';
import { PLAN_COLUMNS, type PlanRow } from './rows.js';

/** What the API's steering commands write: cancel, pause, resume, rollout. */

/**
 * Cancels a plan still to be processed: every job without a result is Cancelled from now on. Batches in flight
 * hold a share lock on the plan row, so the lock taken here waits for them; none starts after. A plan awaiting
 * approval that is cancelled is withdrawn: its approval says so, and by whom. A finished plan is a 409.
 */
export async function cancelPlanRow(
  client: pg.PoolClient,
  tenantKey: string,
  planId: string,
  now: Date,
  withdrawnBy: PrincipalRef | undefined,
): Promise<void> {
  // NO KEY UPDATE, not UPDATE: a batch in flight inserts its counts and jobs (foreign keys to this row, which take
  // KEY SHARE); FOR UPDATE would also wait on those.
  const { rows } = await client.query<{ status: PlanStatus }>(
    'SELECT status FROM alteration_plans WHERE id = $1 AND tenant_id = $2 FOR NO KEY UPDATE',
    [planId, tenantKey],
  );
  const status = rows[0]?.status;
  if (status === undefined) throw new NotFoundError(`Plan ${planId} not found`);
  if (isFinished(status)) throw new ConflictError(`Plan ${planId} is already ${planStatusName(status)}`);
  await client.query(
    `UPDATE alteration_plans p
        SET status = $2, completed_at = $3,
            cancelled_count = cancelled_count + coalesce(p.job_total - (SELECT sum(completed + failed + skipped) FROM alteration_batch_counts c WHERE c.plan_id = p.id), p.job_total, 0)::int,
            pause_reason = NULL, resumes_at = NULL, steering = steering + 1,
            approval = CASE WHEN status = ${PLAN_STATUS.AwaitingApproval}
                            THEN approval || jsonb_build_object('state', 'Withdrawn', 'decidedAt', to_jsonb($4::text),
                                                                'decidedBy', $5::jsonb)
                            ELSE approval END
      WHERE id = $1`,
    [planId, PLAN_STATUS.Cancelled, now, now.toISOString(), JSON.stringify(withdrawnBy ?? null)],
  );
}

/**
 * Pauses a plan still to be processed by hand (batches in flight finish; this waits for them: each holds a share
 * lock on the plan row). Answers whether it paused it; a plan paused by its schedule has its reason made manual.
 */
export async function pausePlanRow(db: Queryable, tenantKey: string, planId: string): Promise<boolean> {
  const { rows } = await db.query<{ status: PlanStatus }>(
    `UPDATE alteration_plans SET status = $3, pause_reason = 'manual', steering = steering + 1
      WHERE id = $1 AND tenant_id = $2 AND status = ANY($4::smallint[]) RETURNING status`,
    [
      planId,
      tenantKey,
      PLAN_STATUS.Paused,
      UNFINISHED_STATUSES.filter((s) => s !== PLAN_STATUS.Paused && s !== PLAN_STATUS.AwaitingApproval),
    ],
  );
  if (rows[0]) return true;
  // A plan paused by its schedule paused by hand holds across windows (section 10): the reason is manual now.
  const { rowCount } = await db.query(
    `UPDATE alteration_plans SET pause_reason = 'manual', resumes_at = NULL, steering = steering + 1
      WHERE id = $1 AND tenant_id = $2 AND status = $3 AND pause_reason = 'schedule'`,
    [planId, tenantKey, PLAN_STATUS.Paused],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Resumes a Paused plan (Running, or Pending when it paused before its jobs existed), its schedule dropped when
 * asked; answers its status, or undefined when it was not Paused.
 */
export async function resumePlanRow(
  db: Queryable,
  tenantKey: string,
  planId: string,
  dropSchedule: boolean,
): Promise<PlanStatus | undefined> {
  const { rows } = await db.query<{ status: PlanStatus }>(
    `UPDATE alteration_plans SET status = CASE WHEN job_total IS NULL THEN $4::smallint ELSE $5::smallint END, pause_reason = NULL,
            resumes_at = NULL, schedule = CASE WHEN $6 THEN NULL ELSE schedule END, steering = steering + 1
      WHERE id = $1 AND tenant_id = $2 AND status = $3 RETURNING status`,
    [planId, tenantKey, PLAN_STATUS.Paused, PLAN_STATUS.Pending, PLAN_STATUS.Running, dropSchedule],
  );
  return rows[0]?.status;
}

/** Changes the rollout of a plan still to be processed (null removes a control); undefined when it is finished. */
export async function changeRolloutRow(
  db: Queryable,
  tenantKey: string,
  planId: string,
  changes: Record<string, unknown>,
): Promise<PlanRow | undefined> {
  const { rows } = await db.query<PlanRow>(
    `UPDATE alteration_plans
        SET rollout = jsonb_build_object('rate', null, 'canary', null, 'stopOnFailureRatio', null)
                      || coalesce(rollout, '{}'::jsonb) || $4::jsonb,
            steering = steering + 1
      WHERE id = $1 AND tenant_id = $2 AND status = ANY($3::smallint[]) RETURNING ${PLAN_COLUMNS}`,
    [planId, tenantKey, UNFINISHED_STATUSES, JSON.stringify(changes)],
  );
  return rows[0];
}
