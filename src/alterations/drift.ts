import type pg from 'pg';
import type { Queryable } from '../db/pool.js';
import type { Logger } from '../logger.js';
import { countJoined, stillMatching } from './filter.js';
import { skippedEntry } from './job-views.js';
import { FilterSchema, JOB_STATUS } from './model.js';
import { type PlanRow, readDriftSource } from './plan-store/index.js';

/** A job of the batch's range still without a result, as the batch read it. */
export interface UnwrittenJob {
  ord: number;
  instance_id: string;
  pending_id: string | null;
  created_at: Date;
}

/**
 * The set that was approved is the set that runs (contract section 12): a plan whose jobs were made while it
 * waited for approval skips, batch by batch, the jobs whose instance no longer matches its filter, and reports at
 * its end how many instances came to match that were not in its set.
 */

/**
 * A batch of a plan whose set was fixed while it waited for approval: the range's jobs whose instance no longer
 * matches the plan's filter (or is gone) end Skipped, their instances untouched, counted with the batch. The
 * jobs left are then read and altered as any batch's (never by the set-based statement, which takes only a range
 * without job rows). Answers how many were skipped.
 */
export async function skipDrifted(
  client: pg.PoolClient,
  plan: PlanRow,
  range: { planId: string; fromOrd: number },
  jobs: readonly UnwrittenJob[],
  at: Date,
): Promise<number> {
  if (jobs.length === 0) return 0;
  const filter = FilterSchema.parse(plan.filter);
  const matching = await stillMatching(
    client,
    filter,
    plan.tenant_id,
    jobs.map((j) => j.instance_id),
  );
  const gone = jobs.filter((j) => !matching.has(j.instance_id));
  if (gone.length === 0) return 0;
  const log = [skippedEntry(at)];
  const rows = gone.map((j) => ({
    ord: j.ord,
    id: j.pending_id ?? undefined,
    created_at: j.created_at.toISOString(),
    instance_id: j.instance_id,
  }));
  await client.query(
    `WITH jobs AS (
       INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, status, log, created_at, started_at, completed_at)
       SELECT $1, u.ord, coalesce(u.id, wfa_job_id($1, u.created_at, u.ord)), u.instance_id, $2, $3::jsonb, u.created_at, $4, $4
         FROM jsonb_to_recordset($5::jsonb) AS u(ord int, id text, created_at timestamptz, instance_id text)
       ON CONFLICT (plan_id, ord, created_at) DO UPDATE SET status = EXCLUDED.status, log = EXCLUDED.log,
              started_at = EXCLUDED.started_at, completed_at = EXCLUDED.completed_at)
     INSERT INTO alteration_batch_counts (plan_id, from_ord, completed, failed, skipped) VALUES ($1, $6, 0, 0, $7)
     ON CONFLICT (plan_id, from_ord) DO UPDATE SET skipped = alteration_batch_counts.skipped + EXCLUDED.skipped`,
    [range.planId, JOB_STATUS.Skipped, JSON.stringify(log), at, JSON.stringify(rows), range.fromOrd, gone.length],
  );
  return gone.length;
}

/**
 * A set fixed for approval: how many instances match the filter now that were not in it (the plan's drift). A
 * figure to report, never a reason to hold the plan: a count that fails (a statement timeout on a large tenant)
 * leaves it unknown (null). Null too for a plan that needed no approval.
 */
export async function driftJoined(deps: { pool: Queryable; logger?: Logger }, planId: string): Promise<number | null> {
  const source = await readDriftSource(deps.pool, planId);
  if (!source) return null;
  try {
    return await countJoined(deps.pool, FilterSchema.parse(source.filter), source.tenant_id, planId);
  } catch (err) {
    deps.logger?.warn({ err, planId }, "a plan's drift (instances that joined its filter) could not be counted");
    return null;
  }
}
