import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import type proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planWorkflowId } from '../../src/temporal/names.js';
import { type PlanProcessing, startPlanWorkflow } from '../../src/temporal/plans.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';

/**
 * A plan's workflow starts eagerly where the API's process runs the worker too (src/temporal/plans.ts
 * `withEagerClient`): the server hands the first workflow task (the jobs' generation) back with the start, and
 * writes it started in the same write as the start itself. Started through matching, the task is recorded
 * started when a poller takes it: later, in a write of its own. The worker stops only once the eager starts in
 * flight have returned (src/service/workers.ts), and its starts and stops run in the order asked for. Real
 * Postgres, a real Temporal dev server.
 */
let h: Harness;

beforeAll(async () => {
  // The worker starts later: until then the API's process has none running, and starts plans as before.
  h = await createHarness({ worker: false });
});
afterAll(async () => {
  await h?.close();
});

const submit = async () => {
  const r = await h.request('POST', '/alterations/submit', {
    body: { alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: ['no-such-instance'] } },
  });
  expect(r.status).toBe(202);
  return r.body.planId as string;
};

const completed = (planId: string) =>
  eventually(
    async () => ((await h.request('GET', `/alterations/${planId}`)).body.plan.status === 4 ? true : undefined),
    `plan ${planId} to complete`,
  );

/** Whether the plan's first workflow task was recorded started in the same write as the workflow's start. */
async function startedWithTheStart(planId: string): Promise<boolean> {
  const { events } = await h.client.workflow.getHandle(planWorkflowId(planId)).fetchHistory();
  const [started, scheduled, taken] = events as proto.temporal.api.history.v1.IHistoryEvent[];
  expect(started?.workflowExecutionStartedEventAttributes).toBeTruthy();
  expect(scheduled?.workflowTaskScheduledEventAttributes).toBeTruthy();
  expect(taken?.workflowTaskStartedEventAttributes?.scheduledEventId?.toString()).toBe('2');
  // One write gives its events consecutive task ids; a poller's later write takes new ones.
  return Number(taken!.taskId) === Number(scheduled!.taskId) + 1;
}

describe("a plan's workflow start", () => {
  it('goes through matching while the process runs no worker, and eagerly once it does', async () => {
    const before = await submit();
    await h.startWorker();
    await completed(before);
    expect(await startedWithTheStart(before)).toBe(false);

    const after = await submit();
    await completed(after);
    expect(await startedWithTheStart(after)).toBe(true);
  });

  it('lets the worker stop only once an eager start in flight has returned', async () => {
    // A plan whose workflow is not running: submitted while no worker runs (its start goes through matching),
    // then terminated, so that it may be started again.
    await h.stopWorker();
    const planId = await submit();
    await h.client.workflow.getHandle(planWorkflowId(planId)).terminate('started again by the test');
    await h.startWorker();
    const role = h.workers!;

    // Its start again, held inside the worker's eager client until the test lets it go.
    let entered!: (eager: Client | undefined) => void;
    const inside = new Promise<Client | undefined>((resolve) => (entered = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const processing: PlanProcessing = {
      taskQueue: h.taskQueue,
      batchSize: 100,
      window: 2,
      batchesPerRun: 500,
      withEagerClient: (start) =>
        role.withEagerClient(async (eager) => {
          entered(eager);
          await released;
          return start(eager);
        }),
    };
    const starting = startPlanWorkflow(h.client, processing, planId);
    try {
      expect(await inside).toBeDefined();

      // Two stops at once (the service's stop beside a test's stopWorker): both wait for the start.
      let stopped = 0;
      const stops = [h.stopWorker(), h.stopWorker()].map((s) => s.then(() => stopped++));
      await sleep(500);
      expect(stopped).toBe(0);
      expect(role.main?.getState()).toBe('RUNNING');
      // What starts meanwhile no longer goes to this worker.
      expect(await role.withEagerClient(async (eager) => eager)).toBeUndefined();

      release();
      await starting;
      await Promise.all(stops);
      // Both ended with it: neither waited out the bound on that wait (10 s, EAGER_STARTS_STOP_WAIT_MS).
      expect(h.logs.filter((l) => /starts still in flight/.test(String(l.msg)))).toEqual([]);
      expect(stopped).toBe(2);
    } finally {
      release();
    }
    // The first task came back with the start. The worker's shutdown runs the tasks it has taken; one that core
    // had not yet handed over when the shutdown began goes to the next worker after its timeout (10 s). Either way
    // the plan runs on: its first task ends completed, by this worker or, timed out, by the next.
    expect(await startedWithTheStart(planId)).toBe(true);
    await h.startWorker();
    await completed(planId);
    const { events } = await h.client.workflow.getHandle(planWorkflowId(planId)).fetchHistory();
    const fourth = events?.[3];
    expect(Boolean(fourth?.workflowTaskCompletedEventAttributes ?? fourth?.workflowTaskTimedOutEventAttributes)).toBe(
      true,
    );
  });

  it('runs starts and stops in the order asked for: a stop during a start stops what it started', async () => {
    await h.stopWorker();
    await Promise.all([h.startWorker(), h.stopWorker()]);
    expect(h.workers!.running()).toBe(false);
    expect(h.workers!.main).toBeUndefined();

    // A second start asked for during a start finds the worker running.
    const [first, second] = await Promise.allSettled([h.startWorker(), h.startWorker()]);
    expect(first.status).toBe('fulfilled');
    expect(second).toMatchObject({ status: 'rejected', reason: { message: 'the worker is already running' } });
    expect(h.workers!.running()).toBe(true);
    // And the worker it started works.
    await completed(await submit());
  });

  it('stops after its bound, saying so, when an eager start never returns (Temporal unreachable)', async () => {
    const bounded = await createHarness({ eagerStartsStopWaitMs: 300 });
    let release!: () => void;
    const never = new Promise<void>((resolve) => (release = resolve));
    let held: Promise<void> | undefined;
    try {
      const role = bounded.workers!;
      let given: Client | undefined;
      held = role.withEagerClient(async (eager) => {
        given = eager;
        await never;
      });
      const began = Date.now();
      await bounded.stopWorker();
      const tookMs = Date.now() - began;
      expect(given).toBeDefined();
      expect(tookMs).toBeGreaterThanOrEqual(250);
      expect(tookMs).toBeLessThan(5_000);
      expect(role.running()).toBe(false);
      expect(
        bounded.logs.some((l) => l.level === 40 && /starts still in flight/.test(String(l.msg)) && l.eagerStarts === 1),
      ).toBe(true);
    } finally {
      release();
      await Promise.allSettled([held]);
      await bounded.close();
    }
  });
});
