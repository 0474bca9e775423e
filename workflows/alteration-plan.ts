import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  continueAsNew,
  isCancellation,
  proxyActivities,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
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
  progress?: { total: number; nextBatch: number };
}

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
export async function alterationPlan(input: AlterationPlanInput): Promise<{ status: 'Completed' | 'Stopped' | 'Failed' }> {
  const { planId } = input;
  try {
    let progress = input.progress;
    if (!progress) {
      const generated = await generateJobs(planId);
      if (generated.stop) return { status: 'Stopped' };
      progress = { total: generated.total, nextBatch: 0 };
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
        await continueAsNew<typeof alterationPlan>({ ...input, progress: { total: progress.total, nextBatch: next } });
      }
      const b = next++;
      startedThisRun++;
      const p: Promise<void> = runJobBatch({ planId, fromOrd: b * input.batchSize, toOrd: (b + 1) * input.batchSize })
        .then((r) => {
          if (r.stop) stop = true;
        })
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
    if (stop) return { status: 'Stopped' };
    await completePlan(planId);
    return { status: 'Completed' };
  } catch (err) {
    if (isCancellation(err)) {
      // An operator cancelled the workflow (Temporal UI or CLI): the plan row must not stay Running. The
      // cleanup runs in a scope the cancellation cannot reach, then the cancellation goes on.
      await CancellationScope.nonCancellable(() => failPlan(planId, 'The plan workflow was cancelled in Temporal'));
      throw err;
    }
    const reason = planFailureReason(err);
    if (reason === undefined) throw err;
    await CancellationScope.nonCancellable(() => failPlan(planId, reason));
    return { status: 'Failed' };
  }
}
