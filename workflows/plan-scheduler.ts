/**
 * The batch scheduling of a plan workflow (workflows/alteration-plan.ts), as a plain class: which job range
 * runs next, when, and when the plan pauses, waits, ends its run or is done. It does no I/O and reads no clock
 * (the workflow gives it the workflow time), so it is deterministic and tested on its own
 * (test/unit/plan-scheduler.test.ts). The workflow turns each `PlanStep` into the command it stands for;
 * recorded histories replay with the same commands (test/integration/plan-replay.test.ts), so a change here
 * that changes what a step carries needs a `patched()` marker in the workflow.
 */

import { isFinished, PLAN_STATUS, type PauseReason, type PlanControl } from '../src/vocabulary/plan.js';

export type { PauseReason, PlanControl } from '../src/vocabulary/plan.js';

/** Where a plan stands, carried across continue-as-new. */
export interface PlanProgress {
  total: number;
  /** Jobs with ord below this have been handed to a batch (except the ranges in `redo`). */
  nextOrd: number;
  completed?: number;
  failed?: number;
  /** Jobs Skipped (their instance no longer matched a filter fixed for approval). Absent when none. */
  skipped?: number;
  batchesDone?: number;
  /** Ranges a batch skipped because the plan was Paused: run again first. */
  redo?: [number, number][];
  /** The canary's pause has happened (or there is no canary to wait for). */
  canaryDone?: boolean;
  /** The throttle's account: jobs started since `since` (workflow time, ms). */
  throttle?: { since: number; jobs: number };
  control?: PlanControl;
  /** Ranges in `redo` (by fromOrd) that stepped aside: they do not step aside again. Absent when none. */
  steppedAside?: number[];
  /** Workflow time until which no batch steps aside (STEP_ASIDE_QUIET_MS after one did). Absent when never. */
  asideUntil?: number;
}

/** What a batch activity answers that steers the plan (src/alterations/processing.ts BatchResult). */
export interface BatchOutcome {
  /** Jobs of the batch's range completed, failed and skipped in all, whichever attempt committed them. */
  batch: { completed: number; failed: number; skipped?: number };
  /** The plan ended (cancelled, failed): no further batch. */
  stop: boolean;
  /** The batch read Paused and did nothing: its range runs again after the resume. */
  paused: boolean;
  /** The batch gave its slot to another tenant's plan that is starting: its range runs again next. */
  steppedAside?: boolean;
  control: PlanControl;
}

/** A batch to start: jobs with ord in [fromOrd, toOrd), not before `notBefore` (workflow time, ms). */
export interface BatchRange {
  fromOrd: number;
  toOrd: number;
  notBefore?: number;
}

/**
 * What the workflow does next. Paused: `readControl`, `stop`, `drain` (batches in flight finish) or `idle`
 * (nothing in flight: wait for a signal or the poll, or end the run when Temporal suggests it). Running: `wait`
 * for a batch in flight, `pause` the plan (canary, failures), `throttle` (a durable timer, unless the plan
 * changes first), `start` a batch, `endRun` (continue as new) or `done` (every batch has run).
 */
export type PlanStep =
  | { kind: 'readControl' }
  | { kind: 'stop' }
  | { kind: 'drain' }
  | { kind: 'idle'; endRun: boolean }
  | { kind: 'wait' }
  | { kind: 'pause'; reason: PauseReason }
  | { kind: 'throttle'; ms: number }
  | { kind: 'start'; batch: BatchRange; mayStepAside: boolean }
  | { kind: 'endRun' }
  | { kind: 'done' };

/** The throttle lets a plan that fell behind catch up by at most this much time's worth of jobs. */
const THROTTLE_CREDIT_MS = 1_000;
/**
 * A throttled batch due sooner than this is started at once and waits in its activity until it is due
 * (server timers fire about a second late, too coarse for batches a quarter second apart).
 */
const THROTTLE_AHEAD_MS = 2_000;

/**
 * After a batch stepped aside for another tenant's starting plan, the batches started within this long (workflow
 * time) do not step aside. With one batch in flight at a time allowed to step aside (`probing`), a plan that
 * other tenants' starts keep meeting loses at most one slot, for at most 1 s (src/alterations/step-aside.ts
 * WAIT_MS), in every STEP_ASIDE_QUIET_MS and more.
 */
export const STEP_ASIDE_QUIET_MS = 2_000;

/** Plans started between `plan-local-steps` and `plan-even-batches`: a plan of fewer than window x this
 * many batches of the configured size runs smaller batches... */
const SMALL_PLAN_ROUNDS = 4;
/** ... of at least this many jobs. */
const MIN_BATCH = 250;
/** Every plan started since `plan-even-batches` takes at least this many rounds of the window. */
const MIN_ROUNDS = 2;

/**
 * The batch size for a plan of `total` jobs started between `plan-local-steps` and `plan-even-batches` (kept
 * so that such a plan replays as it ran): the configured size, or for a small plan a size that gives
 * every slot of the window SMALL_PLAN_ROUNDS batches, so its last round does not run half the window idle
 * (a 10,000-job plan: 16 batches of 625 instead of 10 of 1000 with 2 of 4 slots busy at the end).
 */
export function batchSizeFor(total: number, batchSize: number, window: number): number {
  return Math.min(batchSize, Math.max(MIN_BATCH, Math.ceil(total / (window * SMALL_PLAN_ROUNDS))));
}

/**
 * The batch size for a plan of `total` jobs since `plan-even-batches`: as many batches as the configured
 * size needs (at least window x MIN_ROUNDS), rounded up to whole rounds of the window, each of equal size
 * (at most the configured size; at least MIN_BATCH, which wins over the rounds: 1,100 jobs at window 4 run
 * as 5 batches of 250). A batch has a fixed cost (a transaction, an activity, a workflow task), so a small
 * plan runs two rounds of larger batches rather than four of smaller ones, and no plan ends with a round
 * that leaves part of the window idle (10,000 jobs at 2,000 / window 4: 8 batches of 1,250; 100,000: 52 of
 * 1,924).
 */
export function evenBatchSize(total: number, batchSize: number, window: number): number {
  const rounds = Math.ceil(Math.max(window * MIN_ROUNDS, Math.ceil(total / batchSize)) / window);
  return Math.min(batchSize, Math.max(MIN_BATCH, Math.ceil(total / (rounds * window))));
}

export interface SchedulerOptions {
  /** Jobs of the plan (ords 0..total-1). */
  total: number;
  /** Jobs per batch at no rate (the size the plan's patches give it). */
  batchSize: number;
  /** Batches in flight at once. */
  window: number;
  /**
   * Windows of batches kept scheduled when the plan has no rate: 2 on the batches task queue (a slot that
   * frees takes the next batch at once, and fairness has batches to weigh), 1 before `plan-batch-queue`.
   */
  windowsAhead: number;
  /** Batches one run starts before it continues as new. */
  batchesPerRun: number;
  /** The plan row's steering as generation or the carried progress left it. */
  control: PlanControl;
  /** What an earlier run carried (continue-as-new); absent in a plan's first run. */
  carried?: PlanProgress | undefined;
  /** Workflow time (ms) when the run starts: the throttle's account opens here. */
  now: number;
}

export class PlanScheduler {
  /** Jobs and batches done, over every run of the plan. */
  readonly counts: { completed: number; failed: number; skipped: number; batchesDone: number };
  private readonly total: number;
  private readonly batchSize: number;
  private readonly window: number;
  private readonly windowsAhead: number;
  private readonly batchesPerRun: number;
  private controlNow: PlanControl;
  private nextOrd: number;
  private readonly redo: [number, number][];
  private canaryDone: boolean;
  private throttle: { since: number; jobs: number };
  private pauseFor: PauseReason | null = null;
  private stopped = false;
  private changed = false;
  private startedThisRun = 0;
  /** Batches started whose result has not come back. */
  private running = 0;
  /** Ranges (by fromOrd) that stepped aside once: they run next, and do not step aside again. */
  private readonly steppedAside = new Set<number>();
  /** Workflow time until which the batches it starts do not step aside (STEP_ASIDE_QUIET_MS after one did). */
  private asideUntil: number;
  /** The range in flight that may step aside (by fromOrd), or null: one at a time. */
  private probing: number | null = null;

  constructor(o: SchedulerOptions) {
    const carried = o.carried;
    this.total = o.total;
    this.batchSize = o.batchSize;
    this.window = o.window;
    this.windowsAhead = o.windowsAhead;
    this.batchesPerRun = o.batchesPerRun;
    this.controlNow = o.control;
    this.counts = {
      completed: carried?.completed ?? 0,
      failed: carried?.failed ?? 0,
      skipped: carried?.skipped ?? 0,
      batchesDone: carried?.batchesDone ?? 0,
    };
    this.nextOrd = carried?.nextOrd ?? 0;
    this.redo = [...(carried?.redo ?? [])];
    const canary = this.canary();
    this.canaryDone = carried?.canaryDone ?? !(canary !== null && canary < o.total);
    this.throttle = carried?.throttle ?? { since: o.now, jobs: 0 };
    for (const from of carried?.steppedAside ?? []) this.steppedAside.add(from);
    this.asideUntil = carried?.asideUntil ?? 0;
    this.steer(o.control, o.now);
  }

  /** The plan row's steering as the scheduler last took it. */
  get control(): PlanControl {
    return this.controlNow;
  }

  /** Why the plan is paused (null unless it is). */
  get pauseReason(): PauseReason | null {
    return this.controlNow.status === PLAN_STATUS.Paused ? this.controlNow.pauseReason : null;
  }

  get paused(): boolean {
    return this.controlNow.status === PLAN_STATUS.Paused;
  }

  /** The plan ended (its row says Completed, Failed or Cancelled, or a batch said stop): start nothing more. */
  get stopping(): boolean {
    return this.stopped;
  }

  /** The plan row changed since it was last read (a signal, or a paused plan's poll): read it next. */
  get controlChanged(): boolean {
    return this.changed;
  }

  markChanged(): void {
    this.changed = true;
  }

  /**
   * Takes a newer reading of the plan row; an older one (a batch that read it before a resume) is ignored. A
   * changed rate, or a resume, opens a new throttle account (no catching up on the time paused).
   */
  steer(next: PlanControl, now: number): void {
    if (next.steering < this.controlNow.steering) return;
    const rateChanged = (next.rollout?.rate ?? null) !== (this.controlNow.rollout?.rate ?? null);
    const resumed = this.controlNow.status === PLAN_STATUS.Paused && next.status !== PLAN_STATUS.Paused;
    this.controlNow = next;
    if (rateChanged || resumed) this.throttle = { since: now, jobs: 0 };
    if (isFinished(next.status)) this.stopped = true;
  }

  /**
   * The next step, given the workflow time, the batches in flight and whether Temporal suggests continuing as
   * new. A `start` counts its batch as in flight until `batchEnded`.
   */
  next(now: number, inFlight: number, continueAsNewSuggested: boolean): PlanStep {
    if (this.changed) {
      this.changed = false;
      return { kind: 'readControl' };
    }
    if (this.stopped) return { kind: 'stop' };
    if (this.paused) return inFlight > 0 ? { kind: 'drain' } : { kind: 'idle', endRun: continueAsNewSuggested };
    // Nothing left to start: a pause now would only hold back the completion.
    if (!this.moreToStart()) return inFlight === 0 ? { kind: 'done' } : { kind: 'wait' };
    if (this.pauseFor) {
      if (inFlight > 0) return { kind: 'wait' };
      const reason = this.pauseFor;
      this.pauseFor = null;
      return { kind: 'pause', reason };
    }
    if (inFlight >= this.depth()) return { kind: 'wait' };
    if (this.startedThisRun >= this.batchesPerRun || continueAsNewSuggested)
      return inFlight > 0 ? { kind: 'wait' } : { kind: 'endRun' };
    // The canary: its jobs only, then (once they are all done) a pause.
    const canary = this.canary();
    if (!this.canaryDone && canary !== null && this.nextOrd >= canary && this.redo.length === 0) {
      if (inFlight > 0) return { kind: 'wait' };
      this.canaryDone = true;
      this.pauseFor = 'canary';
      return this.next(now, inFlight, continueAsNewSuggested);
    }
    return this.cut(now);
  }

  /**
   * A batch came back: its counts, or (it read Paused, or a finished plan) its range to run again after a
   * resume (a finished plan runs it never, and counts its jobs as the plan view does: cancelled), or (it
   * stepped aside) its range to run next. Too many
   * failures (past `stopOnFailureRatio`, once at least max(canary, 100) jobs are done) pause the plan next.
   */
  batchEnded(range: BatchRange, outcome: BatchOutcome, now: number): void {
    this.running--;
    if (this.probing === range.fromOrd) this.probing = null;
    this.steer(outcome.control, now);
    if (outcome.stop) this.stopped = true;
    if (outcome.paused || outcome.stop) {
      this.redo.push([range.fromOrd, range.toOrd]);
      return;
    }
    if (outcome.steppedAside) {
      this.redo.unshift([range.fromOrd, range.toOrd]);
      this.steppedAside.add(range.fromOrd);
      this.asideUntil = now + STEP_ASIDE_QUIET_MS;
      return;
    }
    this.counts.completed += outcome.batch.completed;
    this.counts.failed += outcome.batch.failed;
    this.counts.skipped += outcome.batch.skipped ?? 0;
    this.counts.batchesDone++;
    const ratio = this.controlNow.rollout?.stopOnFailureRatio;
    const finished = this.counts.completed + this.counts.failed;
    if (
      ratio !== null &&
      ratio !== undefined &&
      finished >= Math.max(this.canary() ?? 0, 100) &&
      this.counts.failed / finished > ratio
    )
      this.pauseFor = 'failures';
  }

  /**
   * The batches in flight and still to come, as `next` will cut them: the ranges to run again, then the rest
   * at the size in force, cut at the canary's ordinal until the canary is done.
   */
  batchesLeft(): number {
    const size = this.size();
    let from = this.nextOrd;
    let left = this.running + this.redo.length;
    const canary = this.canary();
    if (!this.canaryDone && canary !== null && from < canary) {
      left += Math.ceil((Math.min(canary, this.total) - from) / size);
      from = canary;
    }
    return from < this.total ? left + Math.ceil((this.total - from) / size) : left;
  }

  /** With the loop left: jobs remain, or the plan is paused, so the next run carries on (`progress`). */
  get unfinished(): boolean {
    return this.moreToStart() || this.paused;
  }

  /** What the next run carries. */
  progress(): PlanProgress {
    return {
      total: this.total,
      nextOrd: this.nextOrd,
      completed: this.counts.completed,
      failed: this.counts.failed,
      batchesDone: this.counts.batchesDone,
      redo: this.redo,
      canaryDone: this.canaryDone,
      throttle: this.throttle,
      control: this.controlNow,
      ...(this.counts.skipped > 0 ? { skipped: this.counts.skipped } : {}),
      // Only when set: a run that never stepped aside carries what runs carried before.
      ...(this.steppedAside.size > 0 ? { steppedAside: [...this.steppedAside] } : {}),
      ...(this.asideUntil > 0 ? { asideUntil: this.asideUntil } : {}),
    };
  }

  private canary(): number | null {
    return this.controlNow.rollout?.canary ?? null;
  }

  private moreToStart(): boolean {
    return this.redo.length > 0 || this.nextOrd < this.total;
  }

  /** Jobs per batch: under a rate, at most a quarter second's worth. */
  private size(): number {
    const rate = this.controlNow.rollout?.rate;
    return rate ? Math.max(1, Math.min(this.batchSize, Math.floor(rate / 4))) : this.batchSize;
  }

  /** Batches kept scheduled at once: a throttled plan keeps its window (its batches are spaced). */
  private depth(): number {
    return this.controlNow.rollout?.rate ? this.window : this.window * this.windowsAhead;
  }

  /**
   * The next range (one to run again first), started now or, under a rate, spaced so that the jobs started
   * since the throttle's `since` never get ahead of the rate; a plan that fell behind catches up by at most
   * THROTTLE_CREDIT_MS. A batch due more than THROTTLE_AHEAD_MS ahead waits on a durable timer (its range
   * goes back to the front); one due sooner starts now with `notBefore` and waits in its activity.
   */
  private cut(now: number): PlanStep {
    let range = this.redo.shift();
    if (!range) {
      let to = Math.min(this.total, this.nextOrd + this.size());
      const canary = this.canary();
      if (!this.canaryDone && canary !== null) to = Math.min(to, canary);
      range = [this.nextOrd, to];
      this.nextOrd = to;
    }
    const [fromOrd, toOrd] = range;
    const rate = this.controlNow.rollout?.rate;
    let notBefore: number | undefined;
    if (rate) {
      const t = this.throttle;
      t.since = Math.max(t.since, now - THROTTLE_CREDIT_MS - (t.jobs * 1000) / rate);
      const due = t.since + ((t.jobs + toOrd - fromOrd) * 1000) / rate;
      if (due - now > THROTTLE_AHEAD_MS) {
        this.redo.unshift(range);
        return { kind: 'throttle', ms: Math.ceil(due - now - THROTTLE_AHEAD_MS / 2) };
      }
      t.jobs += toOrd - fromOrd;
      if (due > now) notBefore = Math.ceil(due);
    }
    this.startedThisRun++;
    this.running++;
    // One batch in flight at a time may step aside. A range that stepped aside runs when it comes again, and so
    // do the batches started soon after one did (else each new range would step aside in turn until the other
    // plan's batches are queued); a throttled plan's batches never step aside.
    const mayStepAside = !this.steppedAside.delete(fromOrd) && !rate && now >= this.asideUntil && this.probing === null;
    if (mayStepAside) this.probing = fromOrd;
    return {
      kind: 'start',
      batch: { fromOrd, toOrd, ...(notBefore === undefined ? {} : { notBefore }) },
      mayStepAside,
    };
  }
}
