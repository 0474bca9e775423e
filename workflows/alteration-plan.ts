import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  continueAsNew,
  defineQuery,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { PLAN_STATUS_ATTRIBUTE } from './search-attributes.js';
import { PLAN_RETRY as RETRY } from './retry.js';

const { generateJobs } = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '10 seconds',
  retry: RETRY,
});
const { completePlan, failPlan } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: RETRY,
});
// A batch is one short transaction. A worker that dies mid-batch stops heartbeating and is noticed within
// the heartbeat timeout; the retry finds the committed jobs done and the uncommitted ones still pending.
const { runJobBatch } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '10 seconds',
  retry: RETRY,
});

export interface AlterationPlanInput {
  planId: string;
  /** Jobs per batch activity. */
  batchSize: number;
  /** Batches in flight at once. */
  window: number;
  /** Batches one run starts before it continues as new, so a run's history stays bounded at any plan size. */
  batchesPerRun: number;
  /** Set by continue-as-new: jobs were generated and batches before `nextBatch` are done. */
  progress?: { total: number; nextBatch: number; completed?: number; failed?: number };
  /** The plan search attributes are registered: keep AlterationPlanStatus current (contract section 7). */
  searchAttributes?: boolean;
}

/** What the `progress` query answers, and (counts) what the workflow returns. */
export interface PlanWorkflowProgress {
  status: 'Generating' | 'Running' | 'Completed' | 'Cancelled' | 'Failed';
  /** Jobs of the plan (instances matched), known once they are generated. */
  total: number | null;
  completed: number;
  failed: number;
  batchesDone: number;
  batches: number | null;
}

export const progressQuery = defineQuery<PlanWorkflowProgress>('progress');

const number = (v: number) => String(v).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/**
 * The reason a plan cannot be processed, when `err` says so: an activity that failed non-retryably (bad
 * data, a constraint, a stored plan that no longer parses, a bug in an activity) or ran out of attempts.
 * Anything else (a bug in this workflow code) is not caught: the workflow task fails and a redeploy with a
 * fix lets the same run carry on.
 */
function planFailureReason(err: unknown): string | undefined {
  if (!(err instanceof ActivityFailure)) return undefined;
  const cause = err.cause;
  if (cause instanceof ApplicationFailure && cause.nonRetryable) return cause.message;
  if (err.retryState === 'MAXIMUM_ATTEMPTS_REACHED' || err.retryState === 'NON_RETRYABLE_FAILURE') {
    return `${err.activityType} kept failing: ${cause?.message ?? err.message}`;
  }
  if (err.retryState === 'TIMEOUT') return `${err.activityType} timed out: ${cause?.message ?? err.message}`;
  return undefined;
}

/**
 * Processes an alteration plan: generate the jobs (the matched set is frozen there), run them in batches
 * with a bounded window in flight, then complete the plan. Postgres holds every job's state; this
 * workflow only drives it, so a worker that stops mid-plan is replaced by one that carries on.
 */
export async function alterationPlan(input: AlterationPlanInput): Promise<PlanWorkflowProgress> {
  const { planId } = input;
  const state: PlanWorkflowProgress = {
    status: input.progress ? 'Running' : 'Generating',
    total: input.progress?.total ?? null,
    completed: input.progress?.completed ?? 0,
    failed: input.progress?.failed ?? 0,
    batchesDone: input.progress ? input.progress.nextBatch : 0,
    batches: input.progress ? Math.ceil(input.progress.total / input.batchSize) : null,
  };
  setHandler(progressQuery, () => state);
  // What the Temporal UI shows beside the summary, current after each batch.
  const show = (status: PlanWorkflowProgress['status']) => {
    if (status !== state.status && input.searchAttributes)
      upsertSearchAttributes([{ key: PLAN_STATUS_ATTRIBUTE, value: status }]);
    state.status = status;
    const done = state.completed + state.failed;
    const of =
      state.total === null
        ? ''
        : ` of ${number(state.total)} (${state.total ? Math.floor((100 * done) / state.total) : 100}%)`;
    setCurrentDetails(
      `**${status}** · ${number(done)} jobs done${of} · ${number(state.failed)} failed · batch ${state.batchesDone} of ${state.batches ?? '?'}`,
    );
    return state;
  };
  show(state.status);
  try {
    let progress = input.progress;
    if (!progress) {
      const generated = await generateJobs(planId);
      if (generated.stop) return show('Cancelled');
      progress = { total: generated.total, nextBatch: 0 };
      state.total = generated.total;
      state.batches = Math.ceil(generated.total / input.batchSize);
      show('Running');
    }
    const batches = Math.ceil(progress.total / input.batchSize);
    let next = progress.nextBatch;
    let stop = false;
    let startedThisRun = 0;
    const inFlight = new Set<Promise<void>>();

    while (next < batches && !stop) {
      if (inFlight.size >= input.window) {
        await Promise.race(inFlight);
        continue;
      }
      if (startedThisRun >= input.batchesPerRun || workflowInfo().continueAsNewSuggested) {
        await Promise.all(inFlight);
        if (stop) break;
        await continueAsNew<typeof alterationPlan>({
          ...input,
          progress: { total: progress.total, nextBatch: next, completed: state.completed, failed: state.failed },
        });
      }
      const b = next++;
      startedThisRun++;
      const fromOrd = b * input.batchSize;
      const toOrd = Math.min(progress.total, (b + 1) * input.batchSize);
      const p: Promise<void> = runJobBatch
        .executeWithOptions({ summary: `jobs ${number(fromOrd)}–${number(toOrd - 1)} of ${number(progress.total)}` }, [
          { planId, fromOrd, toOrd: (b + 1) * input.batchSize },
        ])
        .then((r) => {
          if (r.stop) stop = true;
          // The batch's own counts, exact even when a retried attempt found its jobs already done.
          state.completed += r.batch?.completed ?? r.processed - r.failed;
          state.failed += r.batch?.failed ?? r.failed;
          state.batchesDone++;
          show(state.status);
        })
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
    if (stop) return show('Cancelled');
    await completePlan(planId);
    return show('Completed');
  } catch (err) {
    if (isCancellation(err)) {
      // An operator cancelled the workflow (Temporal UI or CLI): the plan row must not stay Running. The
      // cleanup runs in a scope the cancellation cannot reach, then the cancellation goes on.
      await CancellationScope.nonCancellable(async () => {
        await failPlan(planId, 'The plan workflow was cancelled in Temporal');
        show('Failed');
      });
      throw err;
    }
    const reason = planFailureReason(err);
    if (reason === undefined) throw err;
    await CancellationScope.nonCancellable(() => failPlan(planId, reason));
    return show('Failed');
  }
}
