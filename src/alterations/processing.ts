import type pg from 'pg';
import { withTransaction } from '../db/pool.js';
import type { DefinitionCache } from '../engine/definitions.js';
import type { Dispatcher } from '../engine/ports.js';
import { NotFoundError } from '../errors.js';
import { type Clock, now as nowBy } from '../vocabulary/clock.js';
import { type ApplyOutcome, applyAlterations, hasRunnableWork, lockInstances, saveInstances } from './apply.js';
import { compileFilter } from './filter.js';
import { AlterationSchema, FilterSchema, JOB_STATUS, PLAN_STATUS } from './model.js';
import { PLAN_COLUMNS, type PlanRow } from './plans.js';
import { runnableWorkSql } from '../engine/instance-state.js';

/**
 * Processing of a stored plan (src/alterations/plans.ts holds the store and its read model): the steps the
 * alterationPlan workflow runs as activities. Each is idempotent.
 */

export interface ProcessingDeps {
  pool: pg.Pool;
  definitions: DefinitionCache;
  dispatcher: Dispatcher;
  clock?: Clock;
}

export interface GenerateResult {
  /** Jobs generated (0..n-1 by ord). */
  total: number;
  /** The plan is no longer to be processed (cancelled, failed or completed meanwhile). */
  stop: boolean;
}

/**
 * Selects the matching instances and creates one job each, in one set-based statement; the set is
 * frozen here. Marks the plan Generating (startedAt) first, then Dispatching with the job total.
 */
export async function generateJobs(deps: ProcessingDeps, planId: string): Promise<GenerateResult> {
  const now = nowBy(deps.clock);
  await deps.pool.query(
    'UPDATE alteration_plans SET status = $2, started_at = coalesce(started_at, $3) WHERE id = $1 AND status = $4',
    [planId, PLAN_STATUS.Generating, now, PLAN_STATUS.Pending],
  );
  return withTransaction(deps.pool, async (client) => {
    const { rows } = await client.query<PlanRow>(
      `SELECT ${PLAN_COLUMNS} FROM alteration_plans WHERE id = $1 FOR NO KEY UPDATE`,
      [planId],
    );
    const plan = rows[0];
    if (!plan) throw new NotFoundError(`Plan ${planId} not found`);
    if (plan.status !== PLAN_STATUS.Generating) {
      const stop = plan.status >= PLAN_STATUS.Completed;
      return { total: plan.job_total ?? 0, stop };
    }
    const compiled = compileFilter(FilterSchema.parse(plan.filter), plan.tenant_id);
    let total = 0;
    if (compiled.selects) {
      const p = compiled.params.length;
      const inserted = await client.query(
        `INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, created_at)
         SELECT $${p + 1}, m.n - 1, wfa_uuid_v7($${p + 2}::timestamptz, m.n - 1), m.id, $${p + 2}::timestamptz
           FROM (SELECT i.id, row_number() OVER (ORDER BY i.created_at, i.id) AS n
                   FROM workflow_instances i WHERE ${compiled.where}) m`,
        [...compiled.params, planId, now],
      );
      total = inserted.rowCount ?? 0;
    }
    await client.query('UPDATE alteration_plans SET status = $2, job_total = $3 WHERE id = $1', [
      planId,
      PLAN_STATUS.Dispatching,
      total,
    ]);
    return { total, stop: false };
  });
}

export interface BatchResult {
  /** Jobs this attempt processed, and how many of them failed. */
  processed: number;
  failed: number;
  /** Jobs of the batch's range completed and failed in all, whichever attempt committed them. */
  batch: { completed: number; failed: number };
  dispatched: number;
  /** The plan was cancelled (or otherwise ended): process no further batches. */
  stop: boolean;
}

/**
 * Processes the pending jobs with ord in [fromOrd, toOrd): in one transaction, lock the jobs and their
 * instances (id order), apply the plan's alterations to each instance in memory (atomic per instance),
 * write all instances and all jobs back with one statement each. Then dispatch the altered instances
 * that have work. A retry after a crash finds the committed jobs no longer pending and re-dispatches
 * (dispatch is idempotent), so every job runs exactly once.
 */
export async function runJobBatch(
  deps: ProcessingDeps,
  args: { planId: string; fromOrd: number; toOrd: number; redispatch?: boolean },
): Promise<BatchResult> {
  const clock = () => nowBy(deps.clock);
  const { rows } = await deps.pool.query<PlanRow>(`SELECT ${PLAN_COLUMNS} FROM alteration_plans WHERE id = $1`, [
    args.planId,
  ]);
  const plan = rows[0];
  if (!plan) throw new NotFoundError(`Plan ${args.planId} not found`);
  if (plan.status >= PLAN_STATUS.Completed)
    return { processed: 0, failed: 0, batch: { completed: 0, failed: 0 }, dispatched: 0, stop: true };
  if (plan.status === PLAN_STATUS.Dispatching) {
    await deps.pool.query('UPDATE alteration_plans SET status = $2 WHERE id = $1 AND status = $3', [
      args.planId,
      PLAN_STATUS.Running,
      PLAN_STATUS.Dispatching,
    ]);
  }
  const alterations = plan.alterations.map((a) => AlterationSchema.parse(a));

  const { toDispatch, processed, failed } = await withTransaction(deps.pool, async (client) => {
    const started = clock();
    const jobs = await client.query<{ ord: number; instance_id: string }>(
      `SELECT ord, instance_id FROM alteration_jobs
        WHERE plan_id = $1 AND ord >= $2 AND ord < $3 AND status = $4
        ORDER BY ord FOR UPDATE`,
      [args.planId, args.fromOrd, args.toOrd, JOB_STATUS.Pending],
    );
    if (jobs.rows.length === 0) return { toDispatch: [] as string[], processed: 0, failed: 0 };
    const instances = await lockInstances(
      client,
      plan.tenant_id,
      jobs.rows.map((j) => j.instance_id),
    );
    const now = clock();
    const ctx = { db: client, definitions: deps.definitions, now };
    const outcomes: ApplyOutcome[] = [];
    for (const job of jobs.rows) {
      outcomes.push(await applyAlterations(instances.get(job.instance_id), job.instance_id, alterations, ctx));
    }
    await saveInstances(client, outcomes, now, instances);
    await client.query(
      `UPDATE alteration_jobs j SET status = u.status, log = u.log, started_at = $2, completed_at = $3
         FROM unnest($4::int[], $5::smallint[], $6::jsonb[]) AS u(ord, status, log)
        WHERE j.plan_id = $1 AND j.ord >= $7 AND j.ord < $8 AND j.ord = u.ord`,
      [
        args.planId,
        started,
        now,
        jobs.rows.map((j) => j.ord),
        outcomes.map((o) => (o.ok ? JOB_STATUS.Completed : JOB_STATUS.Failed)),
        // A job whose alterations all succeeded stores no log (see jobLog); failed ones keep theirs.
        outcomes.map((o) => (o.ok ? null : JSON.stringify(o.log))),
        args.fromOrd,
        args.toOrd,
      ],
    );
    const failedHere = outcomes.filter((o) => !o.ok).length;
    await client.query(
      `INSERT INTO alteration_batch_counts (plan_id, from_ord, completed, failed) VALUES ($1, $2, $3, $4)
       ON CONFLICT (plan_id, from_ord) DO UPDATE
         SET completed = alteration_batch_counts.completed + EXCLUDED.completed, failed = alteration_batch_counts.failed + EXCLUDED.failed`,
      [args.planId, args.fromOrd, outcomes.length - failedHere, failedHere],
    );
    return {
      toDispatch: outcomes.filter((o) => o.ok && o.state && hasRunnableWork(o.state)).map((o) => o.state!.id),
      processed: jobs.rows.length,
      failed: failedHere,
    };
  });

  let dispatch = toDispatch;
  // A first attempt's counts are the batch's; a retry reads what an earlier attempt may have committed.
  let batch = { completed: processed - failed, failed };
  if (args.redispatch) {
    const { rows: counted } = await deps.pool.query<{ completed: number; failed: number }>(
      'SELECT completed, failed FROM alteration_batch_counts WHERE plan_id = $1 AND from_ord = $2',
      [args.planId, args.fromOrd],
    );
    batch = counted[0] ?? batch;
    // A retried batch: the jobs committed by an earlier attempt may not have been dispatched yet.
    const { rows: again } = await deps.pool.query<{ id: string }>(
      `SELECT i.id FROM alteration_jobs j JOIN workflow_instances i ON i.id = j.instance_id
        WHERE j.plan_id = $1 AND j.ord >= $2 AND j.ord < $3 AND j.status = $4
          AND ${runnableWorkSql('i')}`,
      [args.planId, args.fromOrd, args.toOrd, JOB_STATUS.Completed],
    );
    dispatch = [...new Set([...toDispatch, ...again.map((r) => r.id)])];
  }
  await deps.dispatcher.dispatch(dispatch);
  return { processed, failed, batch, dispatched: dispatch.length, stop: false };
}

/** Marks a processed plan Completed (unless it was cancelled or failed meanwhile). */
export async function completePlan(deps: ProcessingDeps, planId: string): Promise<void> {
  const now = nowBy(deps.clock);
  await deps.pool.query(
    'UPDATE alteration_plans SET status = $2, completed_at = $3 WHERE id = $1 AND status BETWEEN $4 AND $5',
    [planId, PLAN_STATUS.Completed, now, PLAN_STATUS.Pending, PLAN_STATUS.Running],
  );
}

/** Marks a plan that could not be processed Failed, with the reason. */
export async function failPlan(deps: ProcessingDeps, planId: string, reason: string): Promise<void> {
  const now = nowBy(deps.clock);
  await deps.pool.query(
    'UPDATE alteration_plans SET status = $2, completed_at = $3, failure = $4 WHERE id = $1 AND status BETWEEN $5 AND $6',
    [planId, PLAN_STATUS.Failed, now, reason, PLAN_STATUS.Pending, PLAN_STATUS.Running],
  );
}
