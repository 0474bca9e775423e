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
import {
  PausedVerification,
  VERIFY_AFTER_STOP_PATCH,
  VERIFY_PATCH,
  VERIFY_WHILE_PAUSED_PATCH,
  verifyEffect,
} from './plan-verify.js';
import {
  batchSizeFor,
  evenBatchSize,
  type BatchRange,
  type PauseReason,
  type PlanControl,
  type PlanProgress,
  PlanScheduler,
} from './plan-scheduler.js';
import { PLAN_STATUS_ATTRIBUTE } from './search-attributes.js';
import { PLAN_STATUS, type PlanOutcome, planOutcome } from '../src/vocabulary/plan.js';

export type { PlanOutcome } from '../src/vocabulary/plan.js';
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
/**
 * Since this patch (section 10): a plan awaiting approval waits for the decision or its expiry (a durable
 * timer), and a plan with a schedule starts batches only inside its maintenance windows, waiting on durable
 * timers for them to open.
 */
const GOVERNANCE_PATCH = 'plan-governance';
/**
 * Since this patch: a batch on the batches queue may step aside for another tenant's plan that is starting
 * (src/alterations/step-aside.ts), and its range then runs again next.
 */
const STEP_ASIDE_PATCH = 'plan-step-aside';
/**
 * Since this patch (section 10 as amended): a plan awaiting approval makes its jobs before it waits (the set
 * the approver reads is the set that runs), and a plan that needed no approval at submission may be held when its
 * jobs are made (the policy counts them then too); it then waits for approval with its jobs.
 */
const APPROVED_SET_PATCH = 'plan-approved-set';
/** On the batches queue, a plan keeps this many windows of batches scheduled (PlanScheduler `windowsAhead`). */
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

export type { PlanProgress } from './plan-scheduler.js';

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
  /** The plan awaits approval (section 10): until `expiresAt` (ms since the epoch), asked by `requestedBy`. */
  approval?: { expiresAt: number; requestedBy: { kind: string; name: string } };
  /** The plan has a schedule: its batches start only inside its maintenance windows (section 10). */
  scheduled?: boolean;
  /** Carried by continue-as-new: when the window the plan runs in closes (ms since the epoch; null: never). */
  windowClosesAt?: number | null;
  /** The plan checks its effect (section 12): it completes once no completed job is Pending verification. */
  verify?: boolean;
}

type WorkflowStatus = 'AwaitingApproval' | 'Generating' | 'Running' | 'Paused' | 'Completed' | 'Cancelled' | 'Failed';
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
  /** Jobs left alone: their instance no longer matched a filter fixed while the plan awaited approval. */
  skipped?: number;
  /** Of a plan with `verify`, as its last check found them: completed jobs Verified and Unverified. */
  verified?: number;
  unverified?: number;
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

export const progressQuery = defineQuery<PlanWorkflowProgress>('progress');
/** The plan row changed (pause, resume, rollout, cancel): read it again. It carries nothing: the row is the truth. */
export const planChangedSignal = defineSignal('planChanged');

const FINISHED: Record<number, WorkflowStatus> = {
  [PLAN_STATUS.Completed]: 'Completed',
  [PLAN_STATUS.Failed]: 'Failed',
  [PLAN_STATUS.Cancelled]: 'Cancelled',
};
/** While paused, the plan row is read again this often even without a signal (a lost signal costs this much). */
const PAUSED_POLL = 60_000;

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
 * by one that carries on. Which batch runs when is the PlanScheduler's (workflows/plan-scheduler.ts): a
 * Paused plan starts no batch (a batch that reads Paused does nothing and is run again after the resume);
 * `rate` spaces batch starts with durable timers; `canary` runs exactly that many jobs, then pauses;
 * `stopOnFailureRatio` pauses when too many fail. A `planChanged` signal makes the workflow read the plan row
 * at once; while paused it also reads it every minute, so a lost signal only delays.
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
  const state = initialState(carried);
  /** Known once the plan's jobs and steering are. */
  let scheduler: PlanScheduler | null = null;
  // Before the scheduler exists, a signal is remembered here and handed over.
  let changedEarly = false;
  // The pause reason as the scheduler last read the row, even between two updates of the progress.
  setHandler(progressQuery, () => (scheduler ? { ...state, pauseReason: scheduler.pauseReason } : state));
  setHandler(planChangedSignal, () => {
    if (scheduler) scheduler.markChanged();
    else changedEarly = true;
  });
  const show = (status: WorkflowStatus, note?: string) =>
    showProgress(state, status, scheduler, input.searchAttributes, note);
  const governed = patched(GOVERNANCE_PATCH);
  const approvedSet = governed && patched(APPROVED_SET_PATCH);
  const window: ScheduleWindow | null =
    governed && input.scheduled ? { closesAt: input.windowClosesAt ?? 0, resumesAt: null } : null;
  const signalled = () => changedEarly;
  const consume = () => (changedEarly = false);
  const generate = () =>
    approvedSet ? local.generateJobs(planId, { hold: true }) : (localSteps ? local.generateJobs : generateJobs)(planId);
  show(state.status);
  try {
    if (governed && !carried && input.approval) {
      if (approvedSet) {
        // The set the approver reads, made now and kept while the plan waits.
        const made = await generate();
        if (made.stop) return show(FINISHED[made.control.status] ?? 'Cancelled');
        state.total = made.total;
      }
      const decided = await awaitApproval(planId, input.approval, signalled, consume, show);
      if (decided === 'stop') return show('Cancelled');
    }
    if (window && !carried) {
      const open = await awaitWindow(planId, window, signalled, consume, show);
      if (open === 'stop') return show('Cancelled');
    }
    let control: PlanControl;
    let total: number;
    if (carried) {
      total = carried.total;
      control = carried.control ?? (await planControl(planId));
    } else {
      let generated = await generate();
      if (generated.held) {
        // The policy holds the plan now that its jobs are made: it waits for approval with them, then (approved)
        // for its window again, and goes on with the same jobs.
        state.total = generated.total;
        const decided = await awaitApproval(planId, generated.held, signalled, consume, show);
        if (decided === 'stop') return show('Cancelled');
        if (window) {
          const open = await awaitWindow(planId, window, signalled, consume, show);
          if (open === 'stop') return show('Cancelled');
        }
        generated = await generate();
      }
      if (generated.stop) return show(FINISHED[generated.control.status] ?? 'Cancelled');
      total = generated.total;
      control = generated.control;
      state.total = total;
    }
    const plan = new PlanScheduler({
      total,
      batchSize: batchSizeOf(total),
      window: input.window,
      windowsAhead: batchQueue ? LOOKAHEAD : 1,
      batchesPerRun: input.batchesPerRun,
      control,
      carried,
      now: Date.now(),
    });
    scheduler = plan;
    if (changedEarly) plan.markChanged();
    show(state.status);
    await runBatches(plan, input, { total, batchQueue, state, window }, show);
    if (plan.stopping) {
      const stopped = FINISHED[plan.control.status] ?? 'Cancelled';
      // Its completed jobs are checked all the same: a stopped plan says which of them worked.
      if (input.verify && patched(VERIFY_PATCH) && patched(VERIFY_AFTER_STOP_PATCH))
        await verifyEffect(local.checkVerification, planId, state, (note) => show(stopped, note));
      return show(stopped);
    }
    // This run's share is done (or it waited paused long enough): the next run carries on.
    if (plan.unfinished)
      await continueAsNew<typeof alterationPlan>({
        ...input,
        progress: plan.progress(),
        ...(window ? { windowClosesAt: window.closesAt } : {}),
      });
    if (input.verify && patched(VERIFY_PATCH))
      await verifyEffect(local.checkVerification, planId, state, (note) => show('Running', note));
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

/**
 * Turns the scheduler's steps into commands until the run ends (the plan stopped, every batch done, the
 * run's share of batches started, or a paused run that Temporal suggests continuing): batch activities,
 * reads of the plan row, pauses, durable timers. Returns with no batch in flight.
 */
async function runBatches(
  plan: PlanScheduler,
  input: AlterationPlanInput,
  o: { total: number; batchQueue: boolean; state: PlanWorkflowProgress; window: ScheduleWindow | null },
  show: (status: WorkflowStatus) => PlanWorkflowProgress,
): Promise<void> {
  const { planId } = input;
  const inFlight = new Set<Promise<void>>();
  let paused: PausedVerification | undefined;
  const checkWindow = async (w: ScheduleWindow) => {
    const gate = await local.checkSchedule(planId);
    plan.steer(gate.control, Date.now());
    w.closesAt = gate.open ? gate.closesAt : null;
    w.resumesAt = gate.open ? null : gate.resumesAt;
  };
  for (;;) {
    // The window it runs in has closed: the plan pauses by its schedule before another batch starts.
    if (o.window && o.window.closesAt !== null && Date.now() >= o.window.closesAt) await checkWindow(o.window);
    const step = plan.next(Date.now(), inFlight.size, workflowInfo().continueAsNewSuggested);
    if (step.kind === 'readControl') {
      plan.steer(await planControl(planId), Date.now());
      continue;
    }
    if (step.kind === 'stop') break;
    if (step.kind === 'drain') {
      // Paused: the batches in flight finish (those that read Paused did nothing and run again later).
      await Promise.race(inFlight);
      continue;
    }
    if (step.kind === 'idle') {
      show('Paused');
      if (step.endRun) break;
      // A paused plan checks what its batches completed while it waits (a canary says whether it worked).
      if (input.verify && !paused && patched(VERIFY_WHILE_PAUSED_PATCH))
        paused = new PausedVerification(local.checkVerification, planId, o.state);
      const verifyMs = paused ? await paused.next() : null;
      const soonest = (ms: number) => (verifyMs === null ? ms : Math.min(ms, verifyMs));
      if (o.window && plan.pauseReason === 'schedule') {
        // Paused by the schedule (a batch found the window closed): recorded, then a durable timer until the
        // next window opens, unless the row changes first (a resume with ignoreSchedule, a cancel).
        if (o.window.resumesAt === null) await checkWindow(o.window);
        if (plan.pauseReason !== 'schedule') continue;
        const until = o.window.resumesAt;
        const waitMs = until === null ? PAUSED_POLL : Math.max(1, until - Date.now());
        if (!(await condition(() => plan.controlChanged, soonest(waitMs)))) await checkWindow(o.window);
        continue;
      }
      if (!(await condition(() => plan.controlChanged, soonest(PAUSED_POLL)))) plan.markChanged();
      continue;
    }
    if (o.state.status !== 'Running') show('Running');
    if (step.kind === 'done' || step.kind === 'endRun') break;
    if (step.kind === 'wait') await Promise.race(inFlight);
    else if (step.kind === 'pause') plan.steer(await pausePlan(planId, step.reason), Date.now());
    else if (step.kind === 'throttle') await condition(() => plan.controlChanged, step.ms);
    else inFlight.add(startBatch(plan, input, o, step, show, inFlight));
  }
  await Promise.all(inFlight);
}

/** One batch activity; its result steers the plan and shows in its progress. */
function startBatch(
  plan: PlanScheduler,
  input: AlterationPlanInput,
  o: { total: number; batchQueue: boolean; state: PlanWorkflowProgress },
  { batch, mayStepAside }: { batch: BatchRange; mayStepAside: boolean },
  show: (status: WorkflowStatus) => PlanWorkflowProgress,
  inFlight: Set<Promise<void>>,
): Promise<void> {
  // On the batches queue since STEP_ASIDE_PATCH: a batch may give its slot to another tenant's starting plan.
  const aside = o.batchQueue && mayStepAside && patched(STEP_ASIDE_PATCH) ? { mayStepAside: true } : {};
  const summary = `jobs ${number(batch.fromOrd)}–${number(batch.toOrd - 1)} of ${number(o.total)}`;
  const p: Promise<void> = runJobBatch
    .executeWithOptions(
      o.batchQueue
        ? {
            ...BATCH_OPTIONS,
            summary,
            taskQueue: batchesTaskQueue(workflowInfo().taskQueue),
            // The fairness key (the tenant) comes with the workflow; the weight is the plan's size's.
            priority: { fairnessWeight: batchWeight(o.total) },
          }
        : { summary },
      [{ planId: input.planId, ...batch, ...aside }],
    )
    .then((r) => {
      // The batch's own counts, exact even when a retried attempt found its jobs already done.
      plan.batchEnded(batch, r, Date.now());
      show(o.state.status);
    })
    .finally(() => inFlight.delete(p));
  return p;
}

/** What the plan workflow knows of its schedule: when the open window closes, or when the next opens. */
interface ScheduleWindow {
  closesAt: number | null;
  resumesAt: number | null;
}

const when = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

/**
 * Section 10: waits until the plan awaiting approval is decided (the row tells; a signal wakes it) or its
 * approval expires (a durable timer; the row then says Expired). 'go' once approved, 'stop' otherwise.
 */
const APPROVAL_RECHECK_MS = 60_000;

async function awaitApproval(
  planId: string,
  approval: NonNullable<AlterationPlanInput['approval']>,
  signalled: () => boolean,
  consume: () => void,
  show: (status: WorkflowStatus, note?: string) => PlanWorkflowProgress,
): Promise<'go' | 'stop'> {
  const who = `needs the approval of a principal with alterations:approve other than ${approval.requestedBy.name} (${approval.requestedBy.kind}), by ${when(approval.expiresAt)}`;
  // The decision's signal wakes it at once; a signal lost (the API node died between its commit and the
  // signal) is caught by a re-read of the row, after 1 minute and then twice as long each time up to an hour,
  // so a 30-day wait keeps its history to some 750 short waits.
  let recheckMs = APPROVAL_RECHECK_MS;
  for (;;) {
    show('AwaitingApproval', who);
    const untilExpiry = Math.max(1, approval.expiresAt - Date.now());
    const woken = await condition(signalled, Math.min(untilExpiry, recheckMs));
    consume();
    const due = !woken && Date.now() >= approval.expiresAt;
    const control = due ? await local.expireApproval(planId) : await planControl(planId);
    if (control.status === PLAN_STATUS.AwaitingApproval) {
      if (!woken) recheckMs = Math.min(recheckMs * 2, 3_600_000);
      continue;
    }
    return FINISHED[control.status] ? 'stop' : 'go';
  }
}

/**
 * Section 10: before its jobs are generated, waits until the plan's schedule lets it run: the check records
 * a pause by the schedule with `resumesAt`, and a durable timer waits for it (or a signal: a resume with
 * ignoreSchedule, a cancel). 'stop' if the plan ended meanwhile.
 */
async function awaitWindow(
  planId: string,
  window: ScheduleWindow,
  signalled: () => boolean,
  consume: () => void,
  show: (status: WorkflowStatus, note?: string) => PlanWorkflowProgress,
): Promise<'go' | 'stop'> {
  for (;;) {
    const gate = await local.checkSchedule(planId);
    if (gate.finished) return 'stop';
    if (gate.open) {
      window.closesAt = gate.closesAt;
      return 'go';
    }
    show(
      'Paused',
      gate.resumesAt === null ? 'no maintenance window opens again' : `resumes at ${when(gate.resumesAt)}`,
    );
    await condition(signalled, gate.resumesAt === null ? PAUSED_POLL : Math.max(1, gate.resumesAt - Date.now()));
    consume();
  }
}

/** The progress a run starts from: the carried counts, or nothing yet (Generating). */
function initialState(carried: PlanProgress | undefined): PlanWorkflowProgress {
  return {
    status: carried ? 'Running' : 'Generating',
    total: carried?.total ?? null,
    completed: carried?.completed ?? 0,
    failed: carried?.failed ?? 0,
    cancelled: 0,
    skipped: carried?.skipped ?? 0,
    pending: carried ? carried.total - (carried.completed ?? 0) - (carried.failed ?? 0) - (carried.skipped ?? 0) : null,
    batchesDone: carried?.batchesDone ?? 0,
    // Known once the batch size in force is: the batches are counted, never derived from the configured
    // size, which a rate or a canary does not keep to.
    batches: null,
    pauseReason: null,
    outcome: null,
    summary: '',
  };
}

/**
 * Sets the progress (what the query answers and the workflow returns) and what the Temporal UI shows beside
 * the summary, current after each batch. It only sets state and the details (no command), but for the
 * search attribute on a change of status.
 */
function showProgress(
  state: PlanWorkflowProgress,
  status: WorkflowStatus,
  plan: PlanScheduler | null,
  searchAttributes: boolean | undefined,
  note?: string,
): PlanWorkflowProgress {
  if (status !== state.status && searchAttributes)
    upsertSearchAttributes([{ key: PLAN_STATUS_ATTRIBUTE, value: status }]);
  state.status = status;
  if (plan) {
    state.completed = plan.counts.completed;
    state.failed = plan.counts.failed;
    state.skipped = plan.counts.skipped;
    state.batchesDone = plan.counts.batchesDone;
    state.pauseReason = plan.pauseReason;
    state.batches = state.batchesDone + plan.batchesLeft();
  }
  const skipped = state.skipped ?? 0;
  const done = state.completed + state.failed + skipped;
  state.cancelled = status === 'Cancelled' && state.total !== null ? Math.max(0, state.total - done) : 0;
  state.pending = state.total === null ? null : Math.max(0, state.total - done - state.cancelled);
  // Under `verify`, a completed job succeeded only when it was Verified (as the plan view counts it).
  const notSucceeded = state.failed + (state.verified !== undefined ? state.completed - state.verified : 0);
  state.outcome = status === 'Completed' ? planOutcome((state.total ?? 0) - skipped, notSucceeded) : null;
  const of =
    state.total === null
      ? ''
      : ` of ${number(state.total)} (${state.total ? Math.floor((100 * done) / state.total) : 100}%)`;
  const why =
    status === 'Paused' && state.pauseReason
      ? ` (${state.pauseReason})`
      : state.outcome === 'allFailed'
        ? state.failed === notSucceeded
          ? ` (all ${number(state.failed)} jobs failed)`
          : ' (no job verified)'
        : '';
  const cancelled = `${state.cancelled ? ` · ${number(state.cancelled)} cancelled` : ''}${
    skipped ? ` · ${number(skipped)} skipped` : ''
  }${
    state.verified !== undefined
      ? ` · ${number(state.verified)} verified · ${number(state.unverified ?? 0)} unverified`
      : ''
  }`;
  const line = note
    ? `**${status}** · ${note}`
    : `**${status}**${why} · ${number(done)} jobs done${of} · ${number(state.failed)} failed${cancelled} · batch ${state.batchesDone} of ${state.batches ?? '?'}`;
  state.summary = line.replace(/\*\*/g, '');
  setCurrentDetails(line);
  return state;
}
