import type pg from 'pg';
import type { Queryable } from '../../db/pool.js';
import { NotFoundError } from '../../errors.js';
import {
  type Approval,
  type PauseReason,
  type PlanControl,
  PLAN_STATUS,
  type PlanStatus,
  UNFINISHED_STATUSES,
} from '../../vocabulary/plan.js';
import { CONTROL_COLUMNS, type ControlRow, controlOf, PLAN_COLUMNS, type PlanRow } from './rows.js';

/** What the plan workflow's activities write: generation, batches, completion. */

/** A Pending plan begins: Generating, `startedAt` set. */
export async function markGenerating(db: Queryable, planId: string, now: Date): Promise<void> {
  await db.query(
    'UPDATE alteration_plans SET status = $2, started_at = coalesce(started_at, $3) WHERE id = $1 AND status = $4',
    [planId, PLAN_STATUS.Generating, now, PLAN_STATUS.Pending],
  );
}

/** The plan, locked (NO KEY UPDATE) while its jobs are made. */
export async function lockForGeneration(client: pg.PoolClient, planId: string): Promise<PlanRow> {
  const { rows } = await client.query<PlanRow>(
    `SELECT ${PLAN_COLUMNS} FROM alteration_plans WHERE id = $1 FOR NO KEY UPDATE`,
    [planId],
  );
  if (!rows[0]) throw new NotFoundError(`Plan ${planId} not found`);
  return rows[0];
}

/** Its jobs made: Dispatching (a Paused plan stays Paused) with its job total. */
export async function recordJobTotal(
  client: pg.PoolClient,
  planId: string,
  total: number,
  now: Date,
): Promise<PlanControl> {
  const { rows } = await client.query<ControlRow>(
    `UPDATE alteration_plans
        SET status = CASE WHEN status = $4::smallint THEN status ELSE $2::smallint END, job_total = $3, started_at = coalesce(started_at, $5)
      WHERE id = $1 RETURNING ${CONTROL_COLUMNS}`,
    [planId, PLAN_STATUS.Dispatching, total, PLAN_STATUS.Paused, now],
  );
  return controlOf(rows[0]!);
}

/** Its jobs made while it awaits approval: their total, which its approval's `matchedCount` becomes. */
export async function recordJobsAwaitingApproval(
  client: pg.PoolClient,
  planId: string,
  total: number,
): Promise<PlanControl> {
  const { rows } = await client.query<ControlRow>(
    `UPDATE alteration_plans SET job_total = $2, approval = approval || jsonb_build_object('matchedCount', $2::int)
      WHERE id = $1 RETURNING ${CONTROL_COLUMNS}`,
    [planId, total],
  );
  return controlOf(rows[0]!);
}

/** Held by the policy when its jobs were made: AwaitingApproval with them, not started. */
export async function holdForApproval(
  client: pg.PoolClient,
  planId: string,
  total: number,
  approval: Approval,
): Promise<PlanControl> {
  const { rows } = await client.query<ControlRow>(
    `UPDATE alteration_plans SET status = $2, job_total = $3, approval = $4::jsonb, started_at = NULL, steering = steering + 1
      WHERE id = $1 RETURNING ${CONTROL_COLUMNS}`,
    [planId, PLAN_STATUS.AwaitingApproval, total, JSON.stringify(approval)],
  );
  return controlOf(rows[0]!);
}

/** A plan approved with its jobs made goes on to Dispatching. */
export async function markDispatching(client: pg.PoolClient, planId: string): Promise<PlanControl> {
  const { rows } = await client.query<ControlRow>(
    `UPDATE alteration_plans SET status = $2 WHERE id = $1 RETURNING ${CONTROL_COLUMNS}`,
    [planId, PLAN_STATUS.Dispatching],
  );
  return controlOf(rows[0]!);
}

/**
 * The plan as a batch reads it, under a share lock (a pause or cancel waits for the batches in flight), the
 * transaction saying what it is (migration 019's `wfa.cause`): the outbox rows of the instances it writes name the
 * plan. One round trip.
 */
export async function readForBatch(client: pg.PoolClient, planId: string): Promise<PlanRow> {
  const { rows } = await client.query<PlanRow>(
    `SELECT ${PLAN_COLUMNS} FROM alteration_plans CROSS JOIN (SELECT set_config('wfa.cause', $2, true)) AS cause(v)
      WHERE id = $1 FOR SHARE OF alteration_plans`,
    [planId, `plan ${planId}`],
  );
  if (!rows[0]) throw new NotFoundError(`Plan ${planId} not found`);
  return rows[0];
}

/** A plan whose first batch committed is Running. */
export async function markRunning(db: Queryable, planId: string): Promise<void> {
  await db.query('UPDATE alteration_plans SET status = $2 WHERE id = $1 AND status = $3', [
    planId,
    PLAN_STATUS.Running,
    PLAN_STATUS.Dispatching,
  ]);
}

/** Pauses a plan still to be processed for `reason` (its canary, its failures); its steering afterwards, whatever it was. */
export async function pauseFor(db: Queryable, planId: string, reason: PauseReason): Promise<PlanControl> {
  const { rows } = await db.query<ControlRow>(
    `UPDATE alteration_plans SET status = $2, pause_reason = $3, steering = steering + 1
      WHERE id = $1 AND status = ANY($4::smallint[]) RETURNING ${CONTROL_COLUMNS}`,
    [planId, PLAN_STATUS.Paused, reason, [PLAN_STATUS.Generating, PLAN_STATUS.Dispatching, PLAN_STATUS.Running]],
  );
  return rows[0] ? controlOf(rows[0]) : readControl(db, planId);
}

/** The plan's steering as its row says now. */
export async function readControl(db: Queryable, planId: string): Promise<PlanControl> {
  const { rows } = await db.query<ControlRow>(`SELECT ${CONTROL_COLUMNS} FROM alteration_plans WHERE id = $1`, [
    planId,
  ]);
  if (!rows[0]) throw new NotFoundError(`Plan ${planId} not found`);
  return controlOf(rows[0]);
}

/**
 * Completed, unless it was cancelled or failed meanwhile, and only when every job has its result (the batches'
 * counts add up to its total). Answers its status now, its total and the jobs done.
 */
export async function completePlanRow(
  db: Queryable,
  planId: string,
  now: Date,
  driftJoined: number | null = null,
): Promise<{ status: PlanStatus; job_total: number | null; done: number } | undefined> {
  const { rows } = await db.query<{ status: PlanStatus; job_total: number | null; done: number }>(
    `WITH counted AS (SELECT coalesce(sum(completed + failed + skipped), 0)::int AS done FROM alteration_batch_counts WHERE plan_id = $1),
          updated AS (
            UPDATE alteration_plans SET status = $2, completed_at = $3, pause_reason = NULL, drift_joined = $5
             WHERE id = $1 AND status = ANY($4::smallint[]) AND coalesce(job_total, 0) <= (SELECT done FROM counted)
            RETURNING id)
     SELECT CASE WHEN EXISTS (SELECT 1 FROM updated) THEN $2::smallint ELSE p.status END AS status, p.job_total,
            (SELECT done FROM counted) AS done
       FROM alteration_plans p WHERE p.id = $1`,
    [planId, PLAN_STATUS.Completed, now, UNFINISHED_STATUSES, driftJoined],
  );
  return rows[0];
}

/** What a plan's drift is worked out from: its filter and tenant, when its set was fixed while it awaited approval. */
export async function readDriftSource(
  db: Queryable,
  planId: string,
): Promise<{ tenant_id: string; filter: unknown } | undefined> {
  const { rows } = await db.query<{ tenant_id: string; filter: unknown }>(
    'SELECT tenant_id, filter FROM alteration_plans WHERE id = $1 AND approval IS NOT NULL AND revert_of IS NULL',
    [planId],
  );
  return rows[0];
}

/** A plan that could not be processed is Failed, with the reason. */
export async function failPlanRow(db: Queryable, planId: string, reason: string, now: Date): Promise<void> {
  await db.query(
    `UPDATE alteration_plans SET status = $2, completed_at = $3, failure = $4, pause_reason = NULL
      WHERE id = $1 AND status = ANY($5::smallint[])`,
    [planId, PLAN_STATUS.Failed, now, reason, UNFINISHED_STATUSES],
  );
}
