import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  TimeoutFailure,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { PLAN_STATUS_ATTRIBUTE } from './search-attributes.js';
import { batchesTaskQueue } from './task-queues.js';
import { PLAN_RETRY as RETRY } from './retry.js';

// generateJobs and completePlan as (non-local) activities: only for plans started before LOCAL_STEPS_PATCH.
const { generateJobs } = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '10 seconds',
  retry: RETRY,
});
// Generation and completion run as local activities (in the workflow task, without a round trip through
// the server's activity queue each way): a small plan's fixed costs (bench/README.md). A worker that dies
// during one makes its workflow task time out; the next worker runs it again (both are idempotent).
const local = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  retry: RETRY,
});
/** Since this patch: local generation and completion, and small plans in smaller batches (`batchSizeFor`). */
const LOCAL_STEPS_PATCH = 'plan-local-steps';
/** Since this patch: a plan's batches come in whole rounds of the window, at least two (`evenBatchSize`). */
const EVEN_BATCHES_PATCH = 'plan-even-batches';
/** Since this patch: batches run on the batches task queue, weighted by the plan's size (`batchWeight`). */
const BATCH_QUEUE_PATCH = 'plan-batch-queue';
/** On the batches queue, a plan keeps this many windows of batches scheduled (see `depthOf`). */
const LOOKAHEAD = 2;

/**
 * The Task Queue Fairness weight of a plan's batches: a plan of 100,000 jobs weighs 1, one of 10,000 weighs
 * 10 (up to 100 for 1,000 jobs or fewer; down to 0.1 for a million or more). Between two tenants with a plan
 * running each, the smaller plan's batches are handed out that many times as often: a 10,000-job plan
 * beside a 100,000-job one gets 10 of every 11 batches, so it ends in about the time it takes alone while
 * the big one slows by a tenth; plans of a size share evenly. No plan waits forever: a weight is never 0.
 */
export function batchWeight(total: number): number {
  return Math.min(1000, Math.max(0.001, (100_000 / Math.max(1, total)) ** 2));
}
const { completePlan, failPlan, pausePlan, planControl } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: RETRY,
});
// A batch is one short transaction. A worker that dies mid-batch stops heartbeating and is noticed within
// the heartbeat timeout; the retry finds the committed jobs done and the uncommitted ones still pending.
const BATCH_OPTIONS = {
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '10 seconds',
  retry: RETRY,
} as const;
const { runJobBatch } = proxyActivities<Activities>(BATCH_OPTIONS);

type PauseReason = 'manual' | 'canary' | 'failures';
/** The plan row's steering, as the activities read it (src/alterations/processing.ts PlanControl). */
interface PlanControl {
  status: number;
  pauseReason: PauseReason | null;
  rollout: { rate?: number | null; canary?: number | null; stopOnFailureRatio?: number | null } | null;
  steering: number;
}

/** Where a plan stands, carried across continue-as-new. */
export interface PlanProgress {
  total: number;
  /** Jobs with ord below this have been handed to a batch (except the ranges in `redo`). */
  nextOrd: number;
  completed?: number;
  failed?: number;
  batchesDone?: number;
  /** Ranges a batch skipped because the plan was Paused: run again first. */
  redo?: [number, number][];
  /** The canary's pause has happened (or there is no canary to wait for). */
  canaryDone?: boolean;
  /** The throttle's account: jobs started since `since` (workflow time, ms). */
  throttle?: { since: number; jobs: number };
  control?: PlanControl;
}

export interface AlterationPlanInput {
  planId: string;
  /** Jobs per batch activity (fewer under a low rate: a batch is at most a quarter second of the rate). */
  batchSize: number;
  /** Batches in flight at once. */
  window: number;
  /** Batches one run starts before it continues as new, so a run's history stays bounded at any plan size. */
  batchesPerRun: number;
  /** Set by continue-as-new: jobs were generated and this is where processing stands. */
  progress?: PlanProgress;
  /** The plan search attributes are registered: keep AlterationPlanStatus current (contract section 7). */
  searchAttributes?: boolean;
}

type WorkflowStatus = 'Generating' | 'Running' | 'Paused' | 'Completed' | 'Cancelled' | 'Failed';
/**
 * How the jobs of a Completed plan ended (the plan view's `outcome`, src/alterations/model.ts PLAN_OUTCOMES;
 * not imported: workflow code stays free of the API's modules).
 */
export type PlanOutcome = 'allSucceeded' | 'someFailed' | 'allFailed' | 'noJobs';

/**
 * What the `progress` query answers and the workflow returns: the plan view's job counts (as far as the
 * batches have reported them) and its batches, and the same line the Temporal UI shows as current details.
 */
export interface PlanWorkflowProgress {
  status: WorkflowStatus;
  /** Jobs of the plan (instances matched), known once they are generated. */
  total: number | null;
  completed: number;
  failed: number;
  /** Jobs that will not run: those left when the plan was cancelled. */
  cancelled?: number;
  /** Jobs without a result yet (in flight or still to start); null until the jobs are generated. */
  pending?: number | null;
  batchesDone: number;
  /**
   * Batches the plan runs: those done, those in flight and those still to start at the batch size in force
   * (a rate makes batches smaller, a canary cuts one short at its ordinal), so never fewer than
   * `batchesDone`; once every job has run, equal to it. A rate changed mid-way changes it.
   */
  batches: number | null;
  pauseReason?: PauseReason | null;
  /** Set when the plan is Completed: `allFailed` when every job failed (the plan is Completed all the same). */
  outcome?: PlanOutcome | null;
  /** The current details in plain text ("Completed (all 5 jobs failed) · 5 jobs done of 5 (100%) · …"). */
  summary?: string;
}

/** How the jobs of a Completed plan of `total` jobs with `failed` failed ones ended. */
export function planOutcome(total: number, failed: number): PlanOutcome {
  if (total === 0) return 'noJobs';
  if (failed === 0) return 'allSucceeded';
  return failed >= total ? 'allFailed' : 'someFailed';
}

export const progressQuery = defineQuery<PlanWorkflowProgress>('progress');
/** The plan row changed (pause, resume, rollout, cancel): read it again. It carries nothing: the row is the truth. */
export const planChangedSignal = defineSignal('planChanged');

// Plan statuses (src/alterations/model.ts; not imported: workflow code stays free of the API's modules).
const PAUSED = 7;
const FINISHED: Record<number, WorkflowStatus> = { 4: 'Completed', 5: 'Failed', 6: 'Cancelled' };
/** While paused, the plan row is read again this often even without a signal (a lost signal costs this much). */
const PAUSED_POLL = '1 minute';
/** The throttle lets a plan that fell behind catch up by at most this much time's worth of jobs. */
const THROTTLE_CREDIT_MS = 1_000;
/** A throttled batch due sooner than this is started at once and waits in its activity (see the loop). */
const THROTTLE_AHEAD_MS = 2_000;

/** Plans started between `plan-local-steps` and `plan-even-batches`: a plan of fewer than window x this
 * many batches of the configured size runs smaller batches... */
const SMALL_PLAN_ROUNDS = 4;
/** ... of at least this many jobs. */
const MIN_BATCH = 250;

/**
 * The batch size for a plan of `total` jobs started between `plan-local-steps` and `plan-even-batches` (kept
 * so that such a plan replays as it ran): the configured size, or for a small plan a size that gives
 * every slot of the window SMALL_PLAN_ROUNDS batches, so its last round does not run half the window idle
 * (a 10,000-job plan: 16 batches of 625 instead of 10 of 1000 with 2 of 4 slots busy at the end).
 */
function batchSizeFor(total: number, batchSize: number, window: number): number {
  return Math.min(batchSize, Math.max(MIN_BATCH, Math.ceil(total / (window * SMALL_PLAN_ROUNDS))));
}

/** Every plan started since `plan-even-batches` takes at least this many rounds of the window... */
const MIN_ROUNDS = 2;

/**
 * The batch size for a plan of `total` jobs since `plan-even-batches`: as many batches as the configured
 * size needs (at least window x MIN_ROUNDS), rounded up to whole rounds of the window, each of equal size
 * (at most the configured size; at least MIN_BATCH, which wins over the rounds: 1,100 jobs at window 4 run
 * as 5 batches of 250). A batch has a fixed cost (a transaction, an activity,
 * a workflow task), so a small plan runs two rounds of larger batches rather than four of smaller ones, and
 * no plan ends with a round that leaves part of the window idle (10,000 jobs at 2,000 / window 4: 8 batches
 * of 1,250; 100,000: 52 of 1,924).
 */
function evenBatchSize(total: number, batchSize: number, window: number): number {
  const rounds = Math.ceil(Math.max(window * MIN_ROUNDS, Math.ceil(total / batchSize)) / window);
  return Math.min(batchSize, Math.max(MIN_BATCH, Math.ceil(total / (rounds * window))));
}

const number = (v: number) => String(v).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/**
 * The reason a plan cannot be processed, when `err` says so: an activity that failed non-retryably (bad
 * data, a constraint, a stored plan that no longer parses, a bug in an activity) or ran out of attempts.
 * Anything else (a bug in this workflow code) is not caught: the workflow task fails and a redeploy with a
 * fix lets the same run carry on.
 */
function planFailureReason(err: unknown): string | undefined {
  // A local activity's failure (generation, completion) reaches the workflow as the activity's own
  // failure, without an ActivityFailure around it, once its retries are over.
  if (err instanceof ApplicationFailure)
    return err.nonRetryable ? err.message : `A plan step kept failing: ${err.message}`;
  if (err instanceof TimeoutFailure) return `A plan step timed out: ${err.message}`;
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
 * (ranges of job ord) with a bounded window in flight, then complete the plan. Postgres holds every job's
 * state and the plan's steering; this workflow only drives it, so a worker that stops mid-plan is replaced
 * by one that carries on. Steering (contract section 7): a Paused plan starts no batch (a batch that reads
 * Paused does nothing and is run again after the resume); `rate` spaces batch starts with durable timers;
 * `canary` runs exactly that many jobs, then pauses; `stopOnFailureRatio` pauses when too many fail. A
 * `planChanged` signal makes the workflow read the plan row at once; while paused it also reads it every
 * minute, so a lost signal only delays.
 */
export async function alterationPlan(input: AlterationPlanInput): Promise<PlanWorkflowProgress> {
  const { planId } = input;
  const carried = input.progress;
  const localSteps = patched(LOCAL_STEPS_PATCH);
  const evenBatches = localSteps && patched(EVEN_BATCHES_PATCH);
  const batchQueue = evenBatches && patched(BATCH_QUEUE_PATCH);
  const batchSizeOf = (total: number) =>
    evenBatches
      ? evenBatchSize(total, input.batchSize, input.window)
      : localSteps
        ? batchSizeFor(total, input.batchSize, input.window)
        : input.batchSize;
  const state: PlanWorkflowProgress = {
    status: carried ? 'Running' : 'Generating',
    total: carried?.total ?? null,
    completed: carried?.completed ?? 0,
    failed: carried?.failed ?? 0,
    cancelled: 0,
    pending: carried ? carried.total - (carried.completed ?? 0) - (carried.failed ?? 0) : null,
    batchesDone: carried?.batchesDone ?? 0,
    // Known once the batch size in force is (below): the batches are counted, never derived from the
    // configured size, which a rate or a canary does not keep to.
    batches: null,
    pauseReason: null,
    outcome: null,
    summary: '',
  };
  /** Batches in flight and still to start, once the plan's jobs and steering are known. */
  let batchesLeft: (() => number) | null = null;
  let dirty = false;
  setHandler(progressQuery, () => state);
  setHandler(planChangedSignal, () => {
    dirty = true;
  });
  // What the Temporal UI shows beside the summary, current after each batch. It only sets state and the
  // details (no command), but for the search attribute on a change of status, as it always did.
  const show = (status: WorkflowStatus) => {
    if (status !== state.status && input.searchAttributes)
      upsertSearchAttributes([{ key: PLAN_STATUS_ATTRIBUTE, value: status }]);
    state.status = status;
    const done = state.completed + state.failed;
    if (batchesLeft) state.batches = state.batchesDone + batchesLeft();
    state.cancelled = status === 'Cancelled' && state.total !== null ? Math.max(0, state.total - done) : 0;
    state.pending = state.total === null ? null : Math.max(0, state.total - done - state.cancelled);
    state.outcome = status === 'Completed' ? planOutcome(state.total ?? 0, state.failed) : null;
    const of =
      state.total === null
        ? ''
        : ` of ${number(state.total)} (${state.total ? Math.floor((100 * done) / state.total) : 100}%)`;
    const why =
      status === 'Paused' && state.pauseReason
        ? ` (${state.pauseReason})`
        : state.outcome === 'allFailed'
          ? ` (all ${number(state.failed)} jobs failed)`
          : '';
    const cancelled = state.cancelled ? ` · ${number(state.cancelled)} cancelled` : '';
    const line = `**${status}**${why} · ${number(done)} jobs done${of} · ${number(state.failed)} failed${cancelled} · batch ${state.batchesDone} of ${state.batches ?? '?'}`;
    state.summary = line.replace(/\*\*/g, '');
    setCurrentDetails(line);
    return state;
  };
  show(state.status);
  try {
    let control: PlanControl;
    let total: number;
    if (carried) {
      total = carried.total;
      control = carried.control ?? (await planControl(planId));
    } else {
      const generated = await (localSteps ? local.generateJobs : generateJobs)(planId);
      if (generated.stop) return show(FINISHED[generated.control.status] ?? 'Cancelled');
      total = generated.total;
      control = generated.control;
      state.total = total;
    }
    const batchSize = batchSizeOf(total);
    let nextOrd = carried?.nextOrd ?? 0;
    const redo: [number, number][] = [...(carried?.redo ?? [])];
    const canaryOf = () => control.rollout?.canary ?? null;
    let canaryDone = carried?.canaryDone ?? !(canaryOf() !== null && canaryOf()! < total);
    let throttle = carried?.throttle ?? { since: Date.now(), jobs: 0 };
    let pauseFor: PauseReason | null = null;
    let stop = false;
    let startedThisRun = 0;
    const inFlight = new Set<Promise<void>>();

    /** Takes a newer reading of the plan row; an older one (a batch that read before a resume) is ignored. */
    const steer = (next: PlanControl) => {
      if (next.steering < control.steering) return;
      const rateChanged = (next.rollout?.rate ?? null) !== (control.rollout?.rate ?? null);
      const resumed = control.status === PAUSED && next.status !== PAUSED;
      control = next;
      if (rateChanged || resumed) throttle = { since: Date.now(), jobs: 0 };
      state.pauseReason = control.status === PAUSED ? control.pauseReason : null;
      if (FINISHED[control.status]) stop = true;
    };
    steer(control);
    const sizeOf = () => {
      const rate = control.rollout?.rate;
      return rate ? Math.max(1, Math.min(batchSize, Math.floor(rate / 4))) : batchSize;
    };
    // Batches scheduled at once. On the batches queue, twice the window: the worker's batch slots run as
    // many as they can, and the rest wait in the queue, so a slot that frees is taken at once by the next
    // batch (no workflow task in between), and a plan always has batches waiting where Task Queue Fairness
    // can weigh them against other tenants'. A throttled plan keeps its window (its batches are spaced).
    const depthOf = () => (batchQueue && !control.rollout?.rate ? input.window * LOOKAHEAD : input.window);
    // Batches started whose result has not come back.
    let running = 0;
    // The batches still to come, as the loop below will cut them: the ranges to run again, then the rest at
    // the size in force, cut at the canary's ordinal until the canary is done.
    batchesLeft = () => {
      const size = sizeOf();
      let from = nextOrd;
      let left = running + redo.length;
      const canary = canaryOf();
      if (!canaryDone && canary !== null && from < canary) {
        left += Math.ceil((Math.min(canary, total) - from) / size);
        from = canary;
      }
      return from < total ? left + Math.ceil((total - from) / size) : left;
    };
    show(state.status);

    for (;;) {
      if (dirty) {
        dirty = false;
        steer(await planControl(planId));
      }
      if (stop) break;
      if (control.status === PAUSED) {
        // Batches in flight finish (those that read Paused did nothing and are in `redo`).
        if (inFlight.size > 0) {
          await Promise.race(inFlight);
          continue;
        }
        show('Paused');
        if (workflowInfo().continueAsNewSuggested) break;
        if (!(await condition(() => dirty, PAUSED_POLL))) dirty = true;
        continue;
      }
      if (state.status !== 'Running') show('Running');
      const more = redo.length > 0 || nextOrd < total;
      if (!more) {
        // Nothing left to start: a pause now would only hold back the completion.
        if (inFlight.size === 0) break;
        await Promise.race(inFlight);
        continue;
      }
      if (pauseFor) {
        if (inFlight.size > 0) {
          await Promise.race(inFlight);
          continue;
        }
        const reason: PauseReason = pauseFor;
        pauseFor = null;
        steer(await pausePlan(planId, reason));
        continue;
      }
      if (inFlight.size >= depthOf()) {
        await Promise.race(inFlight);
        continue;
      }
      if (startedThisRun >= input.batchesPerRun || workflowInfo().continueAsNewSuggested) {
        if (inFlight.size > 0) {
          await Promise.race(inFlight);
          continue;
        }
        break;
      }
      // The canary: its jobs only, then (once they are all done) a pause.
      const canary = canaryOf();
      if (!canaryDone && canary !== null && nextOrd >= canary && redo.length === 0) {
        if (inFlight.size > 0) {
          await Promise.race(inFlight);
          continue;
        }
        canaryDone = true;
        pauseFor = 'canary';
        continue;
      }
      let range = redo.shift();
      if (!range) {
        let to = Math.min(total, nextOrd + sizeOf());
        if (!canaryDone && canary !== null) to = Math.min(to, canary);
        range = [nextOrd, to];
        nextOrd = to;
      }
      const [fromOrd, toOrd] = range;
      const rate = control.rollout?.rate;
      let notBefore: number | undefined;
      if (rate) {
        // Spaced so that the jobs started since `since` never get ahead of the rate; a plan that fell
        // behind catches up by at most THROTTLE_CREDIT_MS. A wait of seconds is a durable timer; a batch
        // due within THROTTLE_AHEAD_MS is started now and waits in its activity until it is due (server
        // timers fire about a second late, too coarse for batches a quarter second apart).
        const now = Date.now();
        throttle.since = Math.max(throttle.since, now - THROTTLE_CREDIT_MS - (throttle.jobs * 1000) / rate);
        const due = throttle.since + ((throttle.jobs + toOrd - fromOrd) * 1000) / rate;
        if (due - now > THROTTLE_AHEAD_MS) {
          redo.unshift(range);
          await condition(() => dirty, Math.ceil(due - now - THROTTLE_AHEAD_MS / 2));
          continue;
        }
        throttle.jobs += toOrd - fromOrd;
        if (due > now) notBefore = Math.ceil(due);
      }
      startedThisRun++;
      running++;
      const summary = `jobs ${number(fromOrd)}–${number(toOrd - 1)} of ${number(total)}`;
      const p: Promise<void> = runJobBatch
        .executeWithOptions(
          batchQueue
            ? {
                ...BATCH_OPTIONS,
                summary,
                taskQueue: batchesTaskQueue(workflowInfo().taskQueue),
                // The fairness key (the tenant) comes with the workflow; the weight is the plan's size's.
                priority: { fairnessWeight: batchWeight(total) },
              }
            : { summary },
          [{ planId, fromOrd, toOrd, ...(notBefore === undefined ? {} : { notBefore }) }],
        )
        .then((r) => {
          running--;
          steer(r.control);
          if (r.stop) stop = true;
          if (r.paused || r.stop) {
            // The batch did nothing (it read Paused, or a finished plan): its range is still to run, after a
            // resume; a finished plan runs it never, and counts its jobs as the plan view does (cancelled).
            redo.push([fromOrd, toOrd]);
            show(state.status);
            return;
          }
          // The batch's own counts, exact even when a retried attempt found its jobs already done.
          state.completed += r.batch.completed;
          state.failed += r.batch.failed;
          state.batchesDone++;
          const ratio = control.rollout?.stopOnFailureRatio;
          const finished = state.completed + state.failed;
          if (
            ratio !== null &&
            ratio !== undefined &&
            finished >= Math.max(canaryOf() ?? 0, 100) &&
            state.failed / finished > ratio
          )
            pauseFor = 'failures';
          show(state.status);
        })
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
    if (stop) return show(FINISHED[control.status] ?? 'Cancelled');
    if (redo.length > 0 || nextOrd < total || control.status === PAUSED) {
      // This run's share is done (or it waited paused long enough): the next run carries on.
      await continueAsNew<typeof alterationPlan>({
        ...input,
        progress: {
          total,
          nextOrd,
          completed: state.completed,
          failed: state.failed,
          batchesDone: state.batchesDone,
          redo,
          canaryDone,
          throttle,
          control,
        },
      });
    }
    await (localSteps ? local.completePlan : completePlan)(planId);
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
