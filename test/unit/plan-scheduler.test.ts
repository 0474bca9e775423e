import { describe, expect, it } from 'vitest';
import {
  type BatchRange,
  batchSizeFor,
  evenBatchSize,
  type PlanControl,
  PlanScheduler,
  type PlanStep,
  type SchedulerOptions,
  STEP_ASIDE_QUIET_MS,
} from '../../workflows/plan-scheduler.js';
import { PLAN_STATUS } from '../../src/vocabulary/plan.js';

// The plan workflow's batch scheduling on its own (workflows/plan-scheduler.ts): which range runs next and
// when, with the workflow's side (activities, timers, the clock) played by the test.

const RUNNING = PLAN_STATUS.Running;
const PAUSED = PLAN_STATUS.Paused;
const CANCELLED = PLAN_STATUS.Cancelled;

const control = (o: Partial<PlanControl> = {}): PlanControl => ({
  status: RUNNING,
  pauseReason: null,
  rollout: null,
  steering: 0,
  ...o,
});

const scheduler = (o: Partial<SchedulerOptions> = {}) =>
  new PlanScheduler({
    total: 1000,
    batchSize: 100,
    window: 2,
    windowsAhead: 1,
    batchesPerRun: 500,
    control: control(),
    now: 0,
    ...o,
  });

/** Steps taken at `now` with `inFlight` batches out, until one is not a start; the batches started, and that step. */
function startAll(s: PlanScheduler, now: number, inFlight = 0) {
  const started: BatchRange[] = [];
  for (;;) {
    const step = s.next(now, inFlight + started.length, false);
    if (step.kind !== 'start') return { started, then: step };
    started.push(step.batch);
  }
}

const ranges = (batches: BatchRange[]) => batches.map((b) => [b.fromOrd, b.toOrd]);

/** The outcome of a batch that ran its jobs, `failed` of them failing. */
const ran = (b: BatchRange, c: PlanControl, failed = 0) => ({
  batch: { completed: b.toOrd - b.fromOrd - failed, failed },
  stop: false,
  paused: false,
  control: c,
});

describe('batch sizes', () => {
  it('come in whole rounds of the window, at least two, of equal size (since plan-even-batches)', () => {
    expect(evenBatchSize(10_000, 2000, 4)).toBe(1250); // 8 batches: two rounds of 4
    expect(evenBatchSize(100_000, 2000, 4)).toBe(1924); // 52 batches: 13 rounds
    expect(evenBatchSize(2000, 1000, 2)).toBe(500); // 4 batches: two rounds of 2
    expect(evenBatchSize(1100, 2000, 4)).toBe(250); // at least 250 a batch wins over the rounds: 5 batches
    expect(evenBatchSize(100, 2000, 4)).toBe(250); // a tiny plan: one batch
  });

  it('of plans started before even batches keep their old sizing, so that they replay as they ran', () => {
    expect(batchSizeFor(10_000, 1000, 4)).toBe(625); // 16 batches
    expect(batchSizeFor(2000, 1000, 2)).toBe(250); // 8 batches (test/fixtures/plan-history-local-steps.bin)
    expect(batchSizeFor(1_000_000, 1000, 4)).toBe(1000);
  });

  it('are cut evenly over the whole plan, the last one short when the total is not a multiple', () => {
    const s = scheduler({ total: 2000, batchSize: evenBatchSize(2000, 1000, 2), window: 4 });
    expect(ranges(startAll(s, 0).started)).toEqual([
      [0, 500],
      [500, 1000],
      [1000, 1500],
      [1500, 2000],
    ]);
    const t = scheduler({ total: 250, batchSize: 100, window: 4 });
    expect(ranges(startAll(t, 0).started)).toEqual([
      [0, 100],
      [100, 200],
      [200, 250],
    ]);
  });
});

describe('the window of batches in flight', () => {
  it('holds the window, or two windows on the batches queue, and starts the next as one comes back', () => {
    expect(startAll(scheduler({ windowsAhead: 1 }), 0)).toMatchObject({
      started: { length: 2 },
      then: { kind: 'wait' },
    });
    const s = scheduler({ windowsAhead: 2 });
    const { started, then } = startAll(s, 0);
    expect(ranges(started)).toEqual([
      [0, 100],
      [100, 200],
      [200, 300],
      [300, 400],
    ]);
    expect(then).toEqual({ kind: 'wait' });
    s.batchEnded(started[0]!, ran(started[0]!, control()), 10);
    expect(s.next(10, 3, false)).toEqual({ kind: 'start', batch: { fromOrd: 400, toOrd: 500 }, mayStepAside: true });
  });

  it('keeps one window under a rate, whatever the queue', () => {
    const s = scheduler({ windowsAhead: 2, control: control({ rollout: { rate: 1_000_000 } }) });
    expect(startAll(s, 0).started).toHaveLength(2);
  });

  it('waits for the last batches, then is done; the plan then completes in this run', () => {
    const s = scheduler({ total: 150, batchSize: 100 });
    const { started, then } = startAll(s, 0);
    expect(then).toEqual({ kind: 'wait' });
    for (const b of started) s.batchEnded(b, ran(b, control()), 5);
    expect(s.next(5, 0, false)).toEqual({ kind: 'done' });
    expect(s.unfinished).toBe(false);
    expect(s.counts).toEqual({ completed: 150, failed: 0, skipped: 0, batchesDone: 2 });
  });
});

describe('the rate', () => {
  it('makes batches a quarter second of the rate, started with notBefore so that they keep to it', () => {
    const c = control({ rollout: { rate: 40 } }); // batches of 10, one every 250 ms
    const s = scheduler({ control: c });
    const first = startAll(s, 0);
    expect(first.started).toEqual([
      { fromOrd: 0, toOrd: 10, notBefore: 250 },
      { fromOrd: 10, toOrd: 20, notBefore: 500 },
    ]);
    s.batchEnded(first.started[0]!, ran(first.started[0]!, c), 260);
    expect(s.next(260, 1, false)).toEqual({
      kind: 'start',
      batch: { fromOrd: 20, toOrd: 30, notBefore: 750 },
      mayStepAside: false,
    });
  });

  it('waits on a durable timer for a batch due more than 2 s ahead, then starts that same range', () => {
    const c = control({ rollout: { rate: 2 } }); // batches of 1, one every 500 ms
    const s = scheduler({ control: c, window: 8, total: 12 });
    const { started, then } = startAll(s, 0);
    // Due at 500, 1000, 1500 and 2000 ms: started now, each waiting in its activity.
    expect(started.map((b) => b.notBefore)).toEqual([500, 1000, 1500, 2000]);
    // The fifth is due at 2500: a timer of 1.5 s, so that it is started 1 s before it is due.
    expect(then).toEqual({ kind: 'throttle', ms: 1500 });
    expect(s.next(1500, 4, false)).toEqual({
      kind: 'start',
      batch: { fromOrd: 4, toOrd: 5, notBefore: 2500 },
      mayStepAside: false,
    });
  });

  it('lets a plan that fell behind catch up by at most a second', () => {
    const c = control({ rollout: { rate: 10 } }); // batches of 2, one every 200 ms
    const s = scheduler({ control: c, window: 1 });
    const [b] = startAll(s, 0).started;
    expect(b).toEqual({ fromOrd: 0, toOrd: 2, notBefore: 200 });
    // Back 10 s later: the account starts a second back, so 5 batches start at once, then 200 ms apart.
    s.batchEnded(b!, ran(b!, c), 10_000);
    const due: (number | undefined)[] = [];
    for (let i = 0; i < 7; i++) {
      const step = s.next(10_000, 0, false) as Extract<PlanStep, { kind: 'start' }>;
      due.push(step.batch.notBefore);
      s.batchEnded(step.batch, ran(step.batch, c), 10_000);
    }
    expect(due).toEqual([undefined, undefined, undefined, undefined, undefined, 10_200, 10_400]);
  });

  it('puts a range held back by the timer in front of the other ranges to run again', () => {
    const c = control({ rollout: { rate: 2 } }); // batches of 1, 500 ms apart
    const carried = {
      total: 20,
      nextOrd: 20,
      redo: [
        [10, 11],
        [11, 12],
        [12, 13],
      ] as [number, number][],
      throttle: { since: 0, jobs: 10 },
      canaryDone: true,
    };
    const s = scheduler({ total: 20, control: c, window: 8, carried });
    expect(s.next(0, 0, false)).toEqual({ kind: 'throttle', ms: 4500 });
    expect(s.next(4500, 0, false)).toEqual({
      kind: 'start',
      batch: { fromOrd: 10, toOrd: 11, notBefore: 5500 },
      mayStepAside: false,
    });
  });

  it('opens a new account on a resume: the first batch after it is spaced from the resume, not caught up', () => {
    const c = control({ rollout: { rate: 2 } });
    const s = scheduler({ control: control({ ...c, status: PAUSED, pauseReason: 'manual' }), now: 0 });
    s.steer(control({ ...c, steering: 1 }), 60_000);
    expect(s.next(60_000, 0, false)).toEqual({
      kind: 'start',
      batch: { fromOrd: 0, toOrd: 1, notBefore: 60_500 },
      mayStepAside: false,
    });
  });

  it('opens a new account when it changes, so a raised rate goes faster from the next batch', () => {
    const slow = control({ rollout: { rate: 4 }, steering: 0 }); // batches of 1, 250 ms apart
    const s = scheduler({ control: slow, window: 1 });
    const [b] = startAll(s, 0).started;
    expect(b!.notBefore).toBe(250);
    const fast = control({ rollout: { rate: 400 }, steering: 1 }); // batches of 100, 250 ms apart
    s.steer(fast, 100);
    s.batchEnded(b!, ran(b!, fast), 250);
    expect(s.next(250, 0, false)).toEqual({
      kind: 'start',
      batch: { fromOrd: 1, toOrd: 101, notBefore: 350 },
      mayStepAside: false,
    });
  });
});

describe('the canary', () => {
  const c = control({ rollout: { canary: 30 } });

  it('runs exactly its jobs, pauses once they are done, and goes on after the resume', () => {
    const s = scheduler({ total: 200, batchSize: 50, control: c });
    const { started, then } = startAll(s, 0);
    expect(ranges(started)).toEqual([[0, 30]]);
    expect(then).toEqual({ kind: 'wait' });
    s.batchEnded(started[0]!, ran(started[0]!, c), 1);
    expect(s.next(1, 0, false)).toEqual({ kind: 'pause', reason: 'canary' });
    // pausePlan answers the row paused for the canary.
    s.steer(control({ ...c, status: PAUSED, pauseReason: 'canary', steering: 1 }), 2);
    expect(s.pauseReason).toBe('canary');
    expect(s.next(2, 0, false)).toEqual({ kind: 'idle', endRun: false });
    expect(s.batchesLeft()).toBe(4);
    // Resumed: the rest in batches of 50, no second pause.
    s.markChanged();
    expect(s.next(3, 0, false)).toEqual({ kind: 'readControl' });
    s.steer(control({ ...c, steering: 2 }), 3);
    expect(ranges(startAll(s, 3).started)).toEqual([
      [30, 80],
      [80, 130],
    ]);
  });

  it('is no canary when it covers the whole plan', () => {
    const s = scheduler({ total: 20, control: c });
    const { started } = startAll(s, 0);
    s.batchEnded(started[0]!, ran(started[0]!, c), 1);
    expect(s.next(1, 0, false)).toEqual({ kind: 'done' });
  });
});

describe('stopOnFailureRatio', () => {
  it('pauses for failures once at least 100 jobs are done and too many failed, after the batches in flight', () => {
    const c = control({ rollout: { stopOnFailureRatio: 0.2 } });
    const s = scheduler({ total: 1000, batchSize: 50, control: c });
    const first = startAll(s, 0).started; // [0,50) and [50,100)
    s.batchEnded(first[0]!, ran(first[0]!, c, 50), 1);
    // 50 done, all failed: not yet (fewer than 100 finished).
    expect(s.next(1, 1, false)).toEqual({ kind: 'start', batch: { fromOrd: 100, toOrd: 150 }, mayStepAside: true });
    s.batchEnded(first[1]!, ran(first[1]!, c, 0), 2);
    // 100 done, 50 failed: 0.5 > 0.2; the batch in flight finishes first.
    expect(s.next(2, 1, false)).toEqual({ kind: 'wait' });
    s.batchEnded({ fromOrd: 100, toOrd: 150 }, ran({ fromOrd: 100, toOrd: 150 }, c, 0), 3);
    expect(s.next(3, 0, false)).toEqual({ kind: 'pause', reason: 'failures' });
  });

  it('waits for the canary’s jobs when the canary is larger than 100', () => {
    const c = control({ rollout: { stopOnFailureRatio: 0, canary: 300 } });
    const s = scheduler({ total: 1000, batchSize: 100, control: c });
    const first = startAll(s, 0).started;
    for (const b of first) s.batchEnded(b, ran(b, c, 1), 1);
    // 200 done with failures, fewer than the canary's 300: it goes on.
    expect(s.next(1, 0, false)).toEqual({ kind: 'start', batch: { fromOrd: 200, toOrd: 300 }, mayStepAside: true });
  });
});

/** The outcome of a batch that stepped aside for another tenant's starting plan: nothing done. */
const steppedAside = () => ({
  batch: { completed: 0, failed: 0 },
  stop: false,
  paused: false,
  steppedAside: true,
  control: control(),
});

describe('pausing and stopping', () => {
  it('lets the batches in flight drain when paused; one that read Paused runs again first after the resume', () => {
    const s = scheduler();
    const [a, b] = startAll(s, 0).started;
    const paused = control({ status: PAUSED, pauseReason: 'manual', steering: 1 });
    s.steer(paused, 1);
    expect(s.next(1, 2, false)).toEqual({ kind: 'drain' });
    s.batchEnded(a!, ran(a!, control()), 2); // committed before the pause
    s.batchEnded(b!, { batch: { completed: 0, failed: 0 }, stop: false, paused: true, control: paused }, 2);
    expect(s.next(2, 0, false)).toEqual({ kind: 'idle', endRun: false });
    expect(s.counts.batchesDone).toBe(1);
    s.steer(control({ steering: 2 }), 3);
    expect(ranges(startAll(s, 3).started)).toEqual([
      [100, 200],
      [200, 300],
    ]);
  });

  it('lets one batch in flight at a time step aside; a range that stepped aside runs next, and only once', () => {
    const s = scheduler();
    expect(s.next(0, 0, false)).toEqual({ kind: 'start', batch: { fromOrd: 0, toOrd: 100 }, mayStepAside: true });
    expect(s.next(0, 1, false)).toEqual({ kind: 'start', batch: { fromOrd: 100, toOrd: 200 }, mayStepAside: false });
    s.batchEnded({ fromOrd: 0, toOrd: 100 }, steppedAside(), 1);
    // The range comes again at once, ahead of the ranges not started yet, and this time it runs.
    expect(s.next(1, 1, false)).toEqual({ kind: 'start', batch: { fromOrd: 0, toOrd: 100 }, mayStepAside: false });
    expect(s.next(1, 2, false)).toEqual({ kind: 'wait' });
    s.batchEnded({ fromOrd: 100, toOrd: 200 }, ran({ fromOrd: 100, toOrd: 200 }, control()), 2);
    // The next new range, started soon after, does not step aside either.
    expect(s.next(2, 1, false)).toEqual({ kind: 'start', batch: { fromOrd: 200, toOrd: 300 }, mayStepAside: false });
    // Nothing counted for the batch that stepped aside.
    expect(s.counts).toEqual({ completed: 100, failed: 0, skipped: 0, batchesDone: 1 });
  });

  it('lets the next batch step aside once the one that might have came back without doing so', () => {
    const s = scheduler();
    const [a, b] = startAll(s, 0).started;
    s.batchEnded(a!, ran(a!, control()), 1);
    expect(s.next(1, 1, false)).toEqual({ kind: 'start', batch: { fromOrd: 200, toOrd: 300 }, mayStepAside: true });
    s.batchEnded(b!, ran(b!, control()), 2);
    expect(s.next(2, 1, false)).toEqual({ kind: 'start', batch: { fromOrd: 300, toOrd: 400 }, mayStepAside: false });
  });

  it('starts its batches without stepping aside for STEP_ASIDE_QUIET_MS after one did', () => {
    const s = scheduler();
    const [a, b] = startAll(s, 0).started;
    s.batchEnded(a!, steppedAside(), 1000);
    s.batchEnded(b!, ran(b!, control()), 1000);
    expect(s.next(1000, 0, false)).toEqual({ kind: 'start', batch: { fromOrd: 0, toOrd: 100 }, mayStepAside: false });
    expect(s.next(1000 + STEP_ASIDE_QUIET_MS - 1, 1, false)).toEqual({
      kind: 'start',
      batch: { fromOrd: 200, toOrd: 300 },
      mayStepAside: false,
    });
    s.batchEnded({ fromOrd: 0, toOrd: 100 }, ran({ fromOrd: 0, toOrd: 100 }, control()), 1000 + STEP_ASIDE_QUIET_MS);
    expect(s.next(1000 + STEP_ASIDE_QUIET_MS, 1, false)).toEqual({
      kind: 'start',
      batch: { fromOrd: 300, toOrd: 400 },
      mayStepAside: true,
    });
  });

  it('carries a range that stepped aside and the quiet time across continue-as-new, and nothing when none did', () => {
    const plain = scheduler({ batchesPerRun: 2 });
    for (const b of startAll(plain, 0).started) plain.batchEnded(b, ran(b, control()), 1);
    expect(plain.progress()).not.toHaveProperty('steppedAside');
    expect(plain.progress()).not.toHaveProperty('asideUntil');

    const s = scheduler({ batchesPerRun: 2 });
    const [a, b] = startAll(s, 0).started;
    s.batchEnded(a!, steppedAside(), 500);
    s.batchEnded(b!, ran(b!, control()), 500);
    expect(s.next(500, 0, false)).toEqual({ kind: 'endRun' });
    const carried = JSON.parse(JSON.stringify(s.progress()));
    expect(carried).toMatchObject({ redo: [[0, 100]], steppedAside: [0], asideUntil: 500 + STEP_ASIDE_QUIET_MS });
    const next = scheduler({ batchesPerRun: 2, carried, now: 600 });
    expect(next.next(600, 0, false)).toEqual({ kind: 'start', batch: { fromOrd: 0, toOrd: 100 }, mayStepAside: false });
    expect(next.next(600, 1, false)).toEqual({
      kind: 'start',
      batch: { fromOrd: 200, toOrd: 300 },
      mayStepAside: false,
    });
  });

  it('ignores a reading of the plan row older than the one it has', () => {
    const s = scheduler({ control: control({ status: PAUSED, pauseReason: 'manual', steering: 3 }) });
    s.steer(control({ steering: 2 }), 1);
    expect(s.paused).toBe(true);
  });

  it('stops when the row says the plan ended or a batch says stop, whatever is left', () => {
    const s = scheduler();
    const [a] = startAll(s, 0).started;
    s.batchEnded(a!, { batch: { completed: 0, failed: 0 }, stop: true, paused: false, control: control() }, 1);
    expect(s.next(1, 1, false)).toEqual({ kind: 'stop' });
    const t = scheduler();
    t.steer(control({ status: CANCELLED, steering: 1 }), 1);
    expect(t.stopping).toBe(true);
    expect(t.next(1, 0, false)).toEqual({ kind: 'stop' });
  });
});

describe('continue-as-new', () => {
  it('ends a run after batchesPerRun batches, once they are back, and the next run carries on where it stopped', () => {
    const s = scheduler({ total: 700, batchSize: 100, window: 2, batchesPerRun: 3 });
    const first = startAll(s, 0).started;
    for (const b of first) s.batchEnded(b, ran(b, control()), 1);
    const third = startAll(s, 1).started;
    expect(ranges([...first, ...third])).toEqual([
      [0, 100],
      [100, 200],
      [200, 300],
    ]);
    expect(s.next(1, 1, false)).toEqual({ kind: 'wait' });
    s.batchEnded(third[0]!, ran(third[0]!, control(), 7), 2);
    expect(s.next(2, 0, false)).toEqual({ kind: 'endRun' });
    expect(s.unfinished).toBe(true);
    const carried = s.progress();
    expect(carried).toMatchObject({ total: 700, nextOrd: 300, completed: 293, failed: 7, batchesDone: 3, redo: [] });

    const next = new PlanScheduler({
      total: carried.total,
      batchSize: 100,
      window: 2,
      windowsAhead: 1,
      batchesPerRun: 3,
      control: carried.control!,
      carried: JSON.parse(JSON.stringify(carried)),
      now: 5,
    });
    expect(ranges(startAll(next, 5).started)).toEqual([
      [300, 400],
      [400, 500],
    ]);
    expect(next.counts).toEqual({ completed: 293, failed: 7, skipped: 0, batchesDone: 3 });
  });

  it('ends a run early when Temporal suggests it, and a paused run too', () => {
    const s = scheduler();
    expect(s.next(0, 0, true)).toEqual({ kind: 'endRun' });
    const p = scheduler({ control: control({ status: PAUSED, pauseReason: 'manual' }) });
    expect(p.next(0, 0, true)).toEqual({ kind: 'idle', endRun: true });
    expect(p.unfinished).toBe(true);
  });

  it('carries the canary and the throttle, so a throttled canary keeps its pace across runs', () => {
    const c = control({ rollout: { rate: 20, canary: 12 } }); // batches of 5: 5 + 5 + 2, then the pause
    const s = scheduler({ total: 60, batchSize: 50, batchesPerRun: 2, control: c });
    const first = startAll(s, 0).started;
    expect(first).toEqual([
      { fromOrd: 0, toOrd: 5, notBefore: 250 },
      { fromOrd: 5, toOrd: 10, notBefore: 500 },
    ]);
    for (const b of first) s.batchEnded(b, ran(b, c), 505);
    expect(s.next(505, 0, false)).toEqual({ kind: 'endRun' });
    // The next run's first batch is due where the account says (600 ms), not a fresh account's 610, and is
    // still cut at the canary's ordinal: the 2 jobs left of it, then the pause, then 48 jobs in 10 batches.
    const next = scheduler({ total: 60, batchSize: 50, batchesPerRun: 2, control: c, carried: s.progress(), now: 510 });
    expect(startAll(next, 510)).toEqual({
      started: [{ fromOrd: 10, toOrd: 12, notBefore: 600 }],
      then: { kind: 'wait' },
    });
    expect(next.batchesLeft()).toBe(1 + 10);
  });
});
