import type proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planWorkflowId } from '../../src/temporal/names.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';

/**
 * A plan's workflow starts eagerly where the API's process runs the worker too (src/temporal/plans.ts
 * `eagerClient`): the server hands the first workflow task (the jobs' generation) back with the start, and
 * writes it started in the same write as the start itself. Started through matching, the task is recorded
 * started when a poller takes it: later, in a write of its own. Real Postgres, a real Temporal dev server.
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
});
