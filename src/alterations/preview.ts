import type { Queryable } from '../db/pool.js';
import type { DefinitionCache } from '../engine/definitions.js';
import { callsInFlightSql, INSTANCE_COLUMNS, instanceFromRow, type InstanceRow } from '../engine/instance-state.js';
import { runPureSteps } from '../engine/pure-steps.js';
import { type Clock, now as nowBy } from '../vocabulary/clock.js';
import { TimeSlice } from '../vocabulary/time-slice.js';
import { applyAlterations } from './apply.js';
import { compileFilter } from './filter.js';
import { changesBetween, type UndoImage } from './undo.js';
import { type Alteration, type Filter, JOB_STATUS } from './model.js';
import { getPlanView } from './plans.js';
import { revertOne } from './processing.js';
import type { PlanView, PreviewItem } from './views.js';

export interface PreviewRequest {
  alterations: readonly Alteration[];
  filter: Filter;
  limit: number;
}

/**
 * What a plan would do, without doing it: how many instances the filter matches, and for the first
 * `limit` of them (in dry-run order) the outcome and the changes, computed by the function plans apply
 * with (`applyAlterations`, on a copy in memory), and the pure steps they schedule run as the plan runs
 * them (src/engine/pure-steps.ts). Nothing is written and no row is locked.
 *
 * The instances are computed one at a time in time slices (src/vocabulary/time-slice.ts): a preview of
 * instances with thousands of bookmarks never holds the event loop for long, and stops (AbandonedError)
 * once `signal` says its client has gone.
 */
export async function previewPlan(
  deps: { pool: Queryable; definitions: DefinitionCache; clock?: Clock | undefined },
  tenantKey: string,
  req: PreviewRequest,
  signal?: AbortSignal,
): Promise<{ matchedCount: number; items: PreviewItem[] }> {
  const compiled = compileFilter(req.filter, tenantKey);
  if (!compiled.selects) return { matchedCount: 0, items: [] };
  // One after the other: a request holds at most one connection at a time (its tenant's share counts them).
  const count = await deps.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM workflow_instances i WHERE ${compiled.where}`,
    compiled.params,
  );
  const first = await deps.pool.query<InstanceRow>(
    `SELECT ${INSTANCE_COLUMNS}, ${callsInFlightSql('i')} FROM workflow_instances i WHERE ${compiled.where} ORDER BY i.created_at, i.id LIMIT ${Number(req.limit)}`,
    compiled.params,
  );
  const ctx = { db: deps.pool, definitions: deps.definitions, now: nowBy(deps.clock) };
  const items: PreviewItem[] = [];
  const slice = new TimeSlice(signal);
  for (const row of first.rows) {
    await slice.yield();
    const before = instanceFromRow(row);
    const outcome = await applyAlterations(before, before.id, req.alterations, ctx, slice);
    // The pure steps the alterations schedule run with the plan's batch: the preview runs them too (in
    // memory; their records and journal lines are not kept), so that its changes are what the plan writes.
    if (outcome.ok && outcome.state)
      await runPureSteps(deps.pool, deps.definitions, [outcome.state], ctx.now, undefined, slice);
    items.push({
      workflowInstanceId: before.id,
      isSuccessful: outcome.ok,
      log: outcome.log,
      changes: outcome.ok && outcome.state ? changesBetween(before, outcome.state) : [],
    });
  }
  return { matchedCount: count.rows[0]!.n, items };
}

/**
 * What a revert plan would do now (for an approver to read; it has no alterations of its own): for the first
 * `limit` jobs its plan completed, in job order, what the revert's job would do to that instance
 * (`revertOne`, the batch's own function: restored from the job's before-image, or failed where the instance
 * changed since). `matchedCount`: the plan's completed jobs, the count its approval names. Nothing is written
 * and no row is locked.
 */
export async function previewRevert(
  db: Queryable,
  tenantKey: string,
  revertOf: string,
  limit: number,
  signal?: AbortSignal,
): Promise<{ matchedCount: number; items: PreviewItem[] }> {
  const reverted = await getPlanView(db, tenantKey, revertOf);
  const { rows } = await db.query<InstanceRow & { undo: UndoImage | null; written: number | null; written_at: Date }>(
    `SELECT ${INSTANCE_COLUMNS.split(', ')
      .map((c) => `i.${c}`)
      .join(', ')}, ${callsInFlightSql('i')}, j.undo, j.revision AS written, j.completed_at AS written_at
       FROM alteration_jobs j JOIN workflow_instances i ON i.id = j.instance_id AND i.tenant_id = $2
      WHERE j.plan_id = $1 AND j.status = $3 ORDER BY j.ord LIMIT ${Number(limit)}`,
    [revertOf, tenantKey, JOB_STATUS.Completed],
  );
  const now = new Date();
  const items: PreviewItem[] = [];
  const slice = new TimeSlice(signal);
  for (const row of rows) {
    await slice.yield();
    const before = instanceFromRow(row);
    const outcome = revertOne(before, { ...row, instance_id: before.id }, revertOf, now);
    items.push({
      workflowInstanceId: before.id,
      isSuccessful: outcome.ok,
      log: outcome.log,
      changes: outcome.ok && outcome.state ? changesBetween(before, outcome.state) : [],
    });
  }
  return { matchedCount: reverted.jobCounts.completed, items };
}

/** What a stored plan would do now: a revert's restores (`previewRevert`), else its alterations (`previewPlan`). */
export function previewStoredPlan(
  deps: { pool: Queryable; definitions: DefinitionCache },
  tenantKey: string,
  plan: Pick<PlanView, 'alterations' | 'workflowInstanceFilter' | 'revertOf'>,
  limit: number,
  signal?: AbortSignal,
): Promise<{ matchedCount: number; items: PreviewItem[] }> {
  return plan.revertOf
    ? previewRevert(deps.pool, tenantKey, plan.revertOf, limit, signal)
    : previewPlan(
        deps,
        tenantKey,
        { alterations: plan.alterations, filter: plan.workflowInstanceFilter, limit },
        signal,
      );
}

/**
 * A preview as a principal sees it: instance values (`before`, `after`) only to one that may read instances
 * (`workflows/instances:view`); to others the same items, with the paths that change and no values, so that
 * `alterations:view` never reads what the instances' own permission guards.
 */
export function previewShown<P extends { items: PreviewItem[] }>(preview: P, mayReadInstances: boolean): P {
  if (mayReadInstances) return preview;
  return {
    ...preview,
    items: preview.items.map((item) => ({ ...item, changes: item.changes.map((ch) => ({ path: ch.path })) })),
  };
}
