import { ensureJobPartition } from './job-partitions.js';
import { withTransaction } from '../db/pool.js';
import { now as nowBy } from '../vocabulary/clock.js';
import { compileFilter } from './filter.js';
import { type Approval, holdsUnapproved, pendingApproval } from './governance.js';
import { FilterSchema, isFinished, JOB_STATUS, PLAN_STATUS } from './model.js';
import {
  controlOf,
  holdForApproval,
  lockForGeneration,
  markDispatching,
  markGenerating,
  recordJobsAwaitingApproval,
  recordJobTotal,
} from './plan-store/index.js';
import { JOB_SET_SIZE } from './plans.js';
import type { PlanControl } from '../vocabulary/plan.js';
import type { ProcessingDeps } from './processing.js';

/**
 * The jobs of a plan, made once (the plan workflow's first step, src/alterations/processing.ts the steps after):
 * the matched set frozen, and the approval policy asked again about it.
 */

export interface GenerateResult {
  /** Jobs generated (0..n-1 by ord). */
  total: number;
  /** The plan is no longer to be processed (cancelled, failed or completed meanwhile). */
  stop: boolean;
  control: PlanControl;
  /**
   * The policy held the plan when its jobs were made (section 10): it awaits approval now, with its jobs, until
   * `expiresAt` (ms since the epoch). Absent otherwise.
   */
  held?: { expiresAt: number; requestedBy: { kind: string; name: string } };
}

/** How the plan workflow asks for its jobs. */
export interface GenerateOptions {
  /**
   * The tenant's approval policy holds the plan when its jobs are made, where they are a change it did not
   * approve (a plan that matched few at submission and many now; a change split into small plans). Workflows
   * that wait for such a hold ask for it; older ones do not (they would run on).
   */
  hold?: boolean;
}

/**
 * Selects the matching instances and freezes them as the plan's jobs (ords 0..n-1, stored as sets of ids:
 * a job's row is written when a batch runs it), in one set-based statement. Marks the plan Generating (startedAt)
 * first, then Dispatching with the job total. A plan paused before its jobs exist gets them all the same and stays
 * Paused. A revert plan's jobs are the original plan's jobs that changed their instance, in the same order.
 *
 * A plan awaiting approval gets its jobs too and goes on waiting: the set the approver reads is the set that runs
 * (`approval.matchedCount` becomes the job total). A plan that needed no approval may be held now (`hold`): the
 * policy counts its jobs as a change it did not approve (`holdsUnapproved`), and a plan it holds awaits approval
 * with its jobs. Called again once they exist (after an approval), it moves the plan on to Dispatching.
 */
export async function generateJobs(
  deps: ProcessingDeps,
  planId: string,
  opts: GenerateOptions = {},
): Promise<GenerateResult> {
  const now = nowBy(deps.clock);
  await markGenerating(deps.pool, planId, now);
  // The week's partition its jobs go to (made ahead by the retention sweep; made here for a week without one).
  await ensureJobPartition(deps.pool, now);
  return withTransaction(deps.pool, async (client) => {
    const plan = await lockForGeneration(client, planId);
    if (isFinished(plan.status) || plan.job_total !== null) {
      // Made while the plan awaited approval, and approved since: it goes on to Dispatching.
      if (plan.status === PLAN_STATUS.Generating)
        return { total: plan.job_total ?? 0, stop: false, control: await markDispatching(client, planId) };
      return { total: plan.job_total ?? 0, stop: isFinished(plan.status), control: controlOf(plan) };
    }
    // The matched set, frozen: ords 0..n-1 in chunks of JOB_SET_SIZE ids (no job row until a batch runs it).
    // A revert's set also keeps the ord of each reverted job (`source`), by which its batches find it.
    const freeze = (select: string, planParam: string, nowParam: string, source = 'NULL::int') =>
      `WITH sets AS (
         INSERT INTO alteration_job_sets (plan_id, first_ord, instance_ids, created_at, source_ords)
         SELECT ${planParam}, (m.n - 1) / ${JOB_SET_SIZE} * ${JOB_SET_SIZE}, array_agg(m.instance_id ORDER BY m.n), ${nowParam}::timestamptz,
                CASE WHEN count(${source}) > 0 THEN array_agg(${source} ORDER BY m.n) END
           FROM (${select}) m GROUP BY (m.n - 1) / ${JOB_SET_SIZE}
         RETURNING cardinality(instance_ids) AS size)
       SELECT coalesce(sum(size), 0)::int AS total FROM sets`;
    let total = 0;
    if (plan.revert_of !== null) {
      const frozen = await client.query<{ total: number }>(
        freeze(
          `SELECT instance_id, ord, row_number() OVER (ORDER BY ord) AS n
                  FROM alteration_jobs WHERE plan_id = $3 AND status = $4 AND revision IS NOT NULL`,
          '$1',
          '$2',
          'm.ord',
        ),
        [planId, now, plan.revert_of, JOB_STATUS.Completed],
      );
      total = frozen.rows[0]!.total;
    } else {
      const compiled = compileFilter(FilterSchema.parse(plan.filter), plan.tenant_id);
      if (compiled.selects) {
        const p = compiled.params.length;
        const frozen = await client.query<{ total: number }>(
          freeze(
            `SELECT i.id AS instance_id, row_number() OVER (ORDER BY i.created_at, i.id) AS n
               FROM workflow_instances i WHERE ${compiled.where}`,
            `$${p + 1}`,
            `$${p + 2}`,
          ),
          [...compiled.params, planId, now],
        );
        total = frozen.rows[0]!.total;
      }
    }
    if (plan.status === PLAN_STATUS.AwaitingApproval && plan.approval) {
      // The set the approver reads and approves: made now, kept Pending while the plan waits.
      return { total, stop: false, control: await recordJobsAwaitingApproval(client, planId, total) };
    }
    const held =
      opts.hold && plan.approval === null ? await holdsUnapproved(client, plan.tenant_id, total, now, planId) : null;
    if (held) {
      const requestedBy = plan.submitted_by ?? { kind: 'apiKey' as const, id: 'unknown', name: 'unknown' };
      const approval: Approval = {
        ...pendingApproval(held.policy, requestedBy, total, now),
        heldBecause: held.reason,
      };
      return {
        total,
        stop: false,
        control: await holdForApproval(client, planId, total, approval),
        held: { expiresAt: Date.parse(approval.expiresAt), requestedBy },
      };
    }
    return { total, stop: false, control: await recordJobTotal(client, planId, total, now) };
  });
}
