import { ApplicationFailure, ContinueAsNew, continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

const RETRY = { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' } as const;

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
    if (err instanceof ContinueAsNew) throw err;
    // Only non-retryable failures reach here (retryable ones are retried by Temporal until they pass).
    const reason = err instanceof ApplicationFailure ? err.message : err instanceof Error ? (err.cause as Error | undefined)?.message ?? err.message : String(err);
    await failPlan(planId, reason);
    return { status: 'Failed' };
  }
}
