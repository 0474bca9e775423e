import type pg from 'pg';
import type { Queryable } from '../../db/pool.js';
import { NotFoundError } from '../../errors.js';
import { type Approval, PLAN_STATUS, type PlanStatus, type PrincipalRef } from '../../vocabulary/plan.js';
import type { Schedule } from '../schedule.js';

/** What governance writes: decisions, expiry, the schedule's pauses. */

export interface GovernedRow {
  status: PlanStatus;
  approval: Approval | null;
  submitted_by: PrincipalRef | null;
  /** The plan's job count once its jobs (its fixed instance set) exist; null before. */
  job_total: number | null;
}

/** A plan's status, approval and submitter (locked for the decision when `lock`). */
export async function readGoverned(
  db: Queryable,
  tenantKey: string,
  planId: string,
  lock = false,
): Promise<GovernedRow> {
  const { rows } = await db.query<GovernedRow>(
    `SELECT status, approval, submitted_by, job_total FROM alteration_plans WHERE id = $1 AND tenant_id = $2${lock ? ' FOR UPDATE' : ''}`,
    [planId, tenantKey],
  );
  if (!rows[0]) throw new NotFoundError(`Plan ${planId} not found`);
  return rows[0];
}

/**
 * Records a decision: Approved, the plan goes on as if just submitted (Pending); Rejected, it is Cancelled with
 * its jobs. Answers the status it has now.
 */
export async function recordDecision(
  client: pg.PoolClient,
  planId: string,
  decision: 'Approved' | 'Rejected',
  approval: Approval,
  now: Date,
): Promise<PlanStatus> {
  const status = decision === 'Approved' ? PLAN_STATUS.Pending : PLAN_STATUS.Cancelled;
  await client.query(
    `UPDATE alteration_plans SET status = $2::smallint, approval = $3::jsonb, steering = steering + 1,
            completed_at = CASE WHEN $2::smallint = ${PLAN_STATUS.Cancelled} THEN $4::timestamptz ELSE completed_at END,
            job_total = CASE WHEN $2::smallint = ${PLAN_STATUS.Cancelled} THEN coalesce(job_total, 0) ELSE job_total END,
            cancelled_count = CASE WHEN $2::smallint = ${PLAN_STATUS.Cancelled} THEN coalesce(job_total, 0) ELSE cancelled_count END
      WHERE id = $1`,
    [planId, status, JSON.stringify(approval), now],
  );
  return status;
}

/** An undecided plan past its `expiresAt` becomes Cancelled, Expired, with its jobs; answers whether it did. */
export async function expireApprovalRow(db: Queryable, planId: string, now: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE alteration_plans
        SET status = ${PLAN_STATUS.Cancelled}, completed_at = $2, job_total = coalesce(job_total, 0),
            cancelled_count = coalesce(job_total, 0), steering = steering + 1,
            approval = approval || jsonb_build_object('state', 'Expired', 'decidedAt', to_jsonb($3::text))
      WHERE id = $1 AND status = ${PLAN_STATUS.AwaitingApproval}
        AND (approval ->> 'expiresAt')::timestamptz <= $2`,
    [planId, now, now.toISOString()],
  );
  return (rowCount ?? 0) > 0;
}

/** A plan's schedule and steering, locked for the schedule's check. */
export async function lockScheduled(client: pg.PoolClient, planId: string) {
  const { rows } = await client.query<{
    status: PlanStatus;
    pause_reason: string | null;
    schedule: Schedule | null;
    job_total: number | null;
  }>('SELECT status, pause_reason, schedule, job_total FROM alteration_plans WHERE id = $1 FOR UPDATE', [planId]);
  if (!rows[0]) throw new NotFoundError(`Plan ${planId} not found`);
  return rows[0];
}

/** Paused by its schedule until `resumesAt` (a running plan pauses; a plan paused so has its time moved). */
export async function pauseBySchedule(client: pg.PoolClient, planId: string, resumesAt: Date | null, newly: boolean) {
  await client.query(
    newly
      ? `UPDATE alteration_plans SET status = ${PLAN_STATUS.Paused}, pause_reason = 'schedule', resumes_at = $2,
                steering = steering + 1 WHERE id = $1`
      : 'UPDATE alteration_plans SET resumes_at = $2 WHERE id = $1',
    [planId, resumesAt],
  );
}

/** A plan paused by its schedule goes on: Pending before its jobs exist, else Running. */
export async function resumeBySchedule(client: pg.PoolClient, planId: string): Promise<void> {
  await client.query(
    `UPDATE alteration_plans SET status = CASE WHEN job_total IS NULL THEN ${PLAN_STATUS.Pending} ELSE ${PLAN_STATUS.Running} END,
            pause_reason = NULL, resumes_at = NULL, steering = steering + 1 WHERE id = $1`,
    [planId],
  );
}
