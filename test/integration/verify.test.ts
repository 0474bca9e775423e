import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planWorkflowId } from '../../src/temporal/names.js';
import type { PlanWorkflowProgress } from '../../workflows/alteration-plan.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { samples, value } from '../support/metrics.js';
import { connect, event, orderApproval, writeLine } from '../support/workflows.js';

/**
 * Did it work (contract section 12): a plan's `verify` on real Postgres and Temporal. Cancelling the wait of an
 * instance that waits on one event finishes it; one that waits on two goes on waiting on the other, so the same
 * plan fixes the first kind and not the second.
 */
let h: Harness;

const RUN = Date.now().toString(36);
const twoWaits = {
  definitionId: 'two-waits',
  root: {
    type: 'Elsa.Flowchart',
    id: 'flow1',
    start: 'start',
    activities: [writeLine('start', 'started'), event('wait', 'approve'), event('other', 'other')],
    connections: [connect('start', 'wait'), connect('start', 'other')],
  },
};
/** Waits on an event of another id: cancelling `wait` fails there. */
const noWait = {
  definitionId: 'no-wait',
  root: {
    type: 'Elsa.Flowchart',
    id: 'flow1',
    start: 'start',
    activities: [writeLine('start', 'started'), event('hold', 'hold')],
    connections: [connect('start', 'hold')],
  },
};

async function suspended(definitionId: string): Promise<string> {
  const r = await h.request('POST', '/workflow-instances', { body: { definitionId } });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.workflowInstanceId as string;
}

async function submit(body: Record<string, unknown>) {
  const r = await h.request('POST', '/alterations/submit', { body });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.planId as string;
}

const plan = async (planId: string) => (await h.request('GET', `/alterations/${planId}`)).body;
const finished = (planId: string, timeoutMs = 30_000) =>
  eventually(
    async () => {
      const view = await plan(planId);
      return [4, 5, 6].includes(view.plan?.status) ? view : undefined;
    },
    `plan ${planId} to finish`,
    timeoutMs,
  );

async function matched(filter: unknown): Promise<string[]> {
  const r = await h.request('POST', '/alterations/dry-run', { body: filter });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return [...(r.body.workflowInstanceIds as string[])].sort();
}
const sorted = (list: string[]) => [...list].sort();

const cancelWait = [{ type: 'CancelActivity', activityId: 'wait' }];

beforeAll(async () => {
  h = await createHarness();
  for (const body of [orderApproval('one-wait'), twoWaits, noWait]) {
    const r = await h.request('POST', '/workflow-definitions', { body });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
});
afterAll(() => h?.close());

/** The worker's counts of jobs its checks found Verified and Unverified (`/metrics`). */
async function verifications() {
  const res = await h.request('GET', '/metrics');
  const all = samples(String(res.body));
  return {
    verified: value(all, 'wfa_plan_job_verifications_total', { result: 'Verified' }) ?? 0,
    unverified: value(all, 'wfa_plan_job_verifications_total', { result: 'Unverified' }) ?? 0,
  };
}

describe('verify', () => {
  const fixed: string[] = [];
  const notFixed: string[] = [];
  const failing: string[] = [];
  const planId = `verify-mixed-${RUN}`;

  it('verifies the instances the change fixed and not the others, once their time is up, and only then completes', async () => {
    for (let i = 0; i < 3; i++) fixed.push(await suspended('one-wait'));
    for (let i = 0; i < 2; i++) notFixed.push(await suspended('two-waits'));
    failing.push(await suspended('no-wait'));
    const verify = { expect: { statuses: ['Finished'] }, withinSeconds: 3 };
    const before = await verifications();
    await submit({
      id: planId,
      alterations: cancelWait,
      filter: { workflowInstanceIds: [...fixed, ...notFixed, ...failing] },
      verify,
    });
    // Every job completes; the plan stays Running while two are Pending verification.
    const applied = await eventually(async () => {
      const view = await plan(planId);
      return view.plan.jobCounts.completed === 5 ? view : undefined;
    }, 'the jobs to complete');
    expect(applied.plan.status).not.toBe(4);

    const done = await finished(planId);
    expect(done.plan).toMatchObject({
      status: 4,
      outcome: 'someFailed',
      jobCounts: { total: 6, completed: 5, failed: 1 },
      verification: { expect: { statuses: ['Finished'] }, withinSeconds: 3, verified: 3, unverified: 2, pending: 0 },
    });
    // Completed only once the deadline passed: at least withinSeconds after the last job completed.
    const lastJob = Math.max(...done.jobs.map((j: { completedAt: string }) => Date.parse(j.completedAt)));
    expect(Date.parse(done.plan.completedAt) - lastJob).toBeGreaterThanOrEqual(3_000);

    const byInstance = new Map(done.jobs.map((j: { workflowInstanceId: string }) => [j.workflowInstanceId, j]));
    for (const id of fixed) expect(byInstance.get(id)).toMatchObject({ status: 2, verification: 'Verified' });
    for (const id of notFixed) {
      const job = byInstance.get(id) as { status: number; verification: string; log: Record<string, unknown>[] };
      expect(job).toMatchObject({ status: 2, verification: 'Unverified' });
      expect(job.log.at(-1)).toEqual({
        message: 'Not verified within 3 s: the instance is Running/Suspended',
        logLevel: 3,
        timestamp: expect.any(String),
        eventName: 'Verification failed',
      });
    }
    // So do the plan workflow's result and details in Temporal, and the worker's metrics.
    const result = (await h.client.workflow.getHandle(planWorkflowId(planId)).result()) as PlanWorkflowProgress;
    expect(result).toMatchObject({ status: 'Completed', outcome: 'someFailed', verified: 3, unverified: 2 });
    expect(result.summary).toMatch(/ · 3 verified · 2 unverified/);
    const after = await verifications();
    expect({ verified: after.verified - before.verified, unverified: after.unverified - before.unverified }).toEqual({
      verified: 3,
      unverified: 2,
    });
    // The list of plans and an instance's changes say it too.
    const listed = await h.request('GET', '/alterations?limit=100');
    const summary = listed.body.items.find((p: { id: string }) => p.id === planId);
    expect(summary.verification).toMatchObject({ verified: 3, unverified: 2, pending: 0 });
    const changes = await h.request('GET', `/workflow-instances/${notFixed[0]}/alterations`);
    expect(changes.body.items[0]).toMatchObject({ planId, verification: 'Unverified' });
  });

  it("selects a plan's jobs by verification, and retries the unverified ones with the same verify", async () => {
    expect(await matched({ planJobs: { planId, verifications: ['Verified'] } })).toEqual(sorted(fixed));
    expect(await matched({ planJobs: { planId, verifications: ['Unverified'] } })).toEqual(sorted(notFixed));
    // A failed job has no verification: it is taken only where its status is named (as a name or an integer).
    expect(await matched({ planJobs: { planId, verifications: ['Verified', 'Unverified', 'Pending'] } })).toEqual(
      sorted([...fixed, ...notFixed]),
    );
    expect(await matched({ planJobs: { planId, statuses: ['Failed'], verifications: ['Unverified'] } })).toEqual(
      failing,
    );
    expect(await matched({ planJobs: { planId, statuses: [3, 'Completed'], verifications: ['Verified'] } })).toEqual(
      sorted([...fixed, ...failing]),
    );

    const r = await h.request('POST', `/alterations/${planId}/retry-failed`, { body: { id: `${planId}-again` } });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const retry = await finished(`${planId}-again`);
    expect(retry.plan).toMatchObject({
      retryOf: planId,
      workflowInstanceFilter: {
        planJobs: { planId, statuses: ['Failed', 'Completed'], verifications: ['Unverified'] },
      },
      verification: { expect: { statuses: ['Finished'] }, withinSeconds: 3 },
    });
    expect(sorted(retry.jobs.map((j: { workflowInstanceId: string }) => j.workflowInstanceId))).toEqual(
      sorted([...notFixed, ...failing]),
    );
    // Only the unverified ones, asked for: the failed job is not among them.
    const only = await h.request('POST', `/alterations/${planId}/retry-failed`, { body: { include: ['Unverified'] } });
    expect(only.status, JSON.stringify(only.body)).toBe(202);
    expect(
      sorted((await finished(only.body.planId)).jobs.map((j: { workflowInstanceId: string }) => j.workflowInstanceId)),
    ).toEqual(sorted(notFixed));
  });

  it('checks a deadline that passed while the worker was stopped once it runs again', async () => {
    const id = await suspended('two-waits');
    const durable = `verify-durable-${RUN}`;
    await submit({
      id: durable,
      alterations: cancelWait,
      filter: { workflowInstanceIds: [id] },
      verify: { expect: { statuses: ['Finished'] }, withinSeconds: 2 },
    });
    await eventually(async () => {
      const view = await plan(durable);
      return view.plan.jobCounts.completed === 1 ? view : undefined;
    }, 'the job to complete');
    await h.stopWorker();
    await sleep(3_000);
    // No process checks meanwhile: the job is still Pending, the plan Running.
    const waiting = await plan(durable);
    expect(waiting.plan.status).toBe(3);
    expect(waiting.plan.verification).toMatchObject({ pending: 1, unverified: 0 });
    await h.startWorker();
    const done = await finished(durable);
    expect(done.plan.verification).toMatchObject({ verified: 0, unverified: 1, pending: 0 });
    expect(done.plan.outcome).toBe('allFailed');
    const result = (await h.client.workflow.getHandle(planWorkflowId(durable)).result()) as PlanWorkflowProgress;
    expect(result).toMatchObject({ outcome: 'allFailed', summary: expect.stringContaining('(no job verified)') });
    // Its revert inherits the verify: the restored instance is checked against the same expectation.
    const undo = await h.request('POST', `/alterations/${durable}/revert`, { body: { id: `${durable}-undo` } });
    expect(undo.status, JSON.stringify(undo.body)).toBe(202);
    const reverted = await finished(`${durable}-undo`);
    expect(reverted.plan).toMatchObject({
      revertOf: durable,
      jobCounts: { total: 1, completed: 1 },
      verification: { expect: { statuses: ['Finished'] }, withinSeconds: 2, verified: 0, unverified: 1, pending: 0 },
    });
    expect(reverted.jobs[0]).toMatchObject({ verification: 'Unverified' });
  });

  it('checks while its plan is paused (a canary says whether it worked), and after its plan is cancelled', async () => {
    const canaryPlan = await submit({
      alterations: cancelWait,
      filter: { workflowInstanceIds: [await suspended('one-wait'), await suspended('one-wait')] },
      rollout: { canary: 1 },
      verify: { expect: { statuses: ['Finished'] }, withinSeconds: 3600 },
    });
    const paused = await eventually(async () => {
      const view = await plan(canaryPlan);
      return view.plan.status === 7 && view.plan.verification.verified === 1 ? view : undefined;
    }, 'the canary job verified while its plan is paused');
    expect(paused.plan).toMatchObject({ pauseReason: 'canary', jobCounts: { completed: 1 } });

    const stopped = await submit({
      alterations: cancelWait,
      filter: { workflowInstanceIds: [await suspended('two-waits'), await suspended('two-waits')] },
      rollout: { canary: 1 },
      verify: { expect: { statuses: ['Finished'] }, withinSeconds: 2 },
    });
    await eventually(async () => ((await plan(stopped)).plan.status === 7 ? true : undefined), 'the canary pause');
    expect((await h.request('POST', `/alterations/${stopped}/cancel`)).status).toBe(202);
    const cancelled = await finished(stopped);
    const settled = await eventually(async () => {
      const view = await plan(stopped);
      return view.plan.verification.pending === 0 ? view : undefined;
    }, 'the cancelled plan to check its completed job');
    expect(cancelled.plan.status).toBe(6);
    expect(settled.plan).toMatchObject({ status: 6, verification: { verified: 0, unverified: 1, pending: 0 } });
    const retry = await h.request('POST', `/alterations/${stopped}/retry-failed`, { body: {} });
    expect(retry.status, JSON.stringify(retry.body)).toBe(202);
  });

  it('verifies at once what matches at once, and names what is wrong with a verify', async () => {
    const id = await suspended('one-wait');
    const quick = await submit({
      alterations: cancelWait,
      filter: { workflowInstanceIds: [id] },
      verify: { expect: { statuses: ['Finished'], hasIncidents: false }, withinSeconds: 3600 },
    });
    const done = await finished(quick);
    expect(done.plan).toMatchObject({ outcome: 'allSucceeded', verification: { verified: 1, pending: 0 } });

    const bad = async (verify: unknown) => {
      const r = await h.request('POST', '/alterations/submit', {
        body: { alterations: cancelWait, filter: { workflowInstanceIds: [id] }, verify },
      });
      expect(r.status).toBe(400);
      return r.body.errors.map((e: { path: string }) => e.path);
    };
    expect(await bad({ expect: { workflowInstanceIds: [id] }, withinSeconds: 10 })).toContain(
      '/verify/expect/workflowInstanceIds',
    );
    expect(await bad({ expect: { planJobs: { planId } }, withinSeconds: 10 })).toContain('/verify/expect/planJobs');
    expect(await bad({ expect: {}, withinSeconds: 0 })).toContain('/verify/withinSeconds');
    expect(await bad({ expect: {}, withinSeconds: 86_401 })).toContain('/verify/withinSeconds');
    // An expect without a constraint would verify every job at once: refused, and no plan is made.
    expect(await bad({ expect: { emptyFilterSelectsAll: true, statuses: [] }, withinSeconds: 10 })).toEqual([
      '/verify/expect',
    ]);
    const empty = await h.request('POST', '/alterations/submit', {
      body: {
        id: `verify-empty-${RUN}`,
        alterations: cancelWait,
        filter: { workflowInstanceIds: [id] },
        verify: { expect: {}, withinSeconds: 10 },
      },
    });
    expect(empty.status).toBe(400);
    expect(empty.body.errors).toEqual([{ path: '/verify/expect', message: expect.stringContaining('constraint') }]);
    expect((await h.request('GET', `/alterations/verify-empty-${RUN}`)).status).toBe(404);
  });
});
