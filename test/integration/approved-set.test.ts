import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * The set that was approved is the set that runs (contract section 12): a plan that waits for approval fixes its
 * instances at submission; when it runs, a job whose instance no longer matches the filter ends Skipped and its
 * instance is left as it was, instances that came to match are not added, and the finished plan says both
 * (`drift`). On real Postgres and Temporal, over HTTP, in a tenant of its own.
 */
let h: Harness;
const RUN = Date.now().toString(36);
const TENANT = `approved-set-${RUN}`;
const DEFINITION = `approved-set-${RUN}`;
let submitter: string;
let approver: string;
let versionId: string;

async function plan(planId: string) {
  const r = await h.request('GET', `/alterations/${planId}`, { key: submitter });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

const finished = (planId: string) =>
  eventually(async () => {
    const r = await plan(planId);
    return [4, 5, 6].includes(r.plan.status) ? r : undefined;
  }, `plan ${planId} to finish`);

async function amounts(ids: string[]): Promise<Record<string, unknown>> {
  const { rows } = await h.pool.query<{ id: string; amount: unknown }>(
    "SELECT id, variables->'amount' AS amount FROM workflow_instances WHERE id = ANY($1::text[])",
    [ids],
  );
  return Object.fromEntries(rows.map((r) => [r.id, r.amount]));
}

beforeAll(async () => {
  h = await createHarness();
  submitter = await h.keyWith(['*'], TENANT);
  // Made by the harness, not by the submitter: four eyes let it decide the submitter's plans.
  approver = await h.keyWith(['alterations:approve', 'alterations:view'], TENANT);
  const def = await h.request('POST', '/workflow-definitions', { key: submitter, body: approvalWithNote(DEFINITION) });
  expect(def.status, JSON.stringify(def.body)).toBe(201);
  versionId = def.body.id as string;
});
afterAll(async () => {
  await h?.close();
});

describe('a plan awaiting approval', () => {
  it('runs the set it was approved for: what no longer matches is Skipped and left alone, what came to match is not added', async () => {
    const ids = await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 5,
      tenantId: TENANT,
      variables: { amount: 0 },
    });
    const filter = { definitionIds: [DEFINITION], statuses: ['Running'] };
    const submitted = await h.request('POST', '/alterations/submit', {
      key: submitter,
      body: {
        id: `approved-${RUN}`,
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 7 }],
        filter,
        approval: { required: true },
      },
    });
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const planId = submitted.body.planId as string;
    // Its jobs exist while it waits: the set the approver reads.
    const waiting = await eventually(async () => {
      const r = await plan(planId);
      return r.plan.status === 8 && r.plan.jobCounts.total === 5 ? r : undefined;
    }, 'the plan to await approval with its jobs');
    expect(waiting.plan.approval.matchedCount).toBe(5);
    expect(waiting.plan.jobCounts).toMatchObject({ total: 5, pending: 5, skipped: 0 });
    expect(waiting.plan.drift).toEqual({ skipped: 0, joined: null });

    // Meanwhile two instances are cancelled (another plan; no approval asked) and a new one comes to match.
    const [gone1, gone2, ...kept] = ids;
    const cancel = await h.request('POST', '/alterations/submit', {
      key: submitter,
      body: { alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: [gone1, gone2] } },
    });
    expect(cancel.status, JSON.stringify(cancel.body)).toBe(202);
    const cancelled = await finished(cancel.body.planId as string);
    expect(cancelled.plan.jobCounts).toMatchObject({ completed: 2 });
    const [joined] = await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 1,
      tenantId: TENANT,
      variables: { amount: 0 },
    });

    const approved = await h.request('POST', `/alterations/${planId}/approve`, { key: approver, body: {} });
    expect(approved.status, JSON.stringify(approved.body)).toBe(202);
    const done = await finished(planId);
    expect(done.plan.status).toBe(4);
    expect(done.plan.jobCounts).toEqual({
      total: 5,
      pending: 0,
      running: 0,
      completed: 3,
      failed: 0,
      cancelled: 0,
      skipped: 2,
    });
    // The jobs that ran all succeeded; the skipped ones were left alone on purpose.
    expect(done.plan.outcome).toBe('allSucceeded');
    expect(done.plan.drift).toEqual({ skipped: 2, joined: 1 });
    expect(await amounts([...ids, joined!])).toEqual({
      [gone1!]: 0,
      [gone2!]: 0,
      ...Object.fromEntries(kept.map((id) => [id, 7])),
      [joined!]: 0,
    });

    // The job list filters by Skipped (its name or 5); each says why.
    for (const status of ['Skipped', '5']) {
      const r = await h.request('GET', `/alterations/${planId}/jobs?status=${status}`, { key: submitter });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.items.map((j: { workflowInstanceId: string }) => j.workflowInstanceId).sort()).toEqual(
        [gone1, gone2].sort(),
      );
      for (const job of r.body.items) {
        expect(job.status).toBe(5);
        expect(job.log).toEqual([
          expect.objectContaining({
            message: "No longer matches the plan's filter",
            logLevel: 3,
            eventName: 'Skipped',
          }),
        ]);
      }
    }
    // So does the filter field planJobs.
    const dry = await h.request('POST', '/alterations/dry-run', {
      key: submitter,
      body: { planJobs: { planId, statuses: ['Skipped'] } },
    });
    expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    expect([...dry.body.workflowInstanceIds].sort()).toEqual([gone1, gone2].sort());
    // An instance's changes list the skipped job too (beside the Cancel's, made after it).
    const changes = await h.request('GET', `/workflow-instances/${gone1}/alterations`, { key: submitter });
    expect(changes.body.items).toContainEqual(
      expect.objectContaining({ planId, status: 5, log: [expect.objectContaining({ eventName: 'Skipped' })] }),
    );
  });

  it('approves only a fixed set: an approval before the jobs exist waits for them, and is a 409 while there are none', async () => {
    const ids = await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 2,
      tenantId: TENANT,
      variables: { amount: 0 },
    });
    const body = (id: string) => ({
      id,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 9 }],
      filter: { workflowInstanceIds: ids },
      approval: { required: true },
    });
    // Approved at once after the submission: the approval waits for the jobs, and the plan runs its set.
    const quick = `approved-at-once-${RUN}`;
    expect((await h.request('POST', '/alterations/submit', { key: submitter, body: body(quick) })).status).toBe(202);
    const approved = await h.request('POST', `/alterations/${quick}/approve`, { key: approver, body: {} });
    expect(approved.status, JSON.stringify(approved.body)).toBe(202);
    expect((await finished(quick)).plan).toMatchObject({ status: 4, jobCounts: { total: 2, completed: 2 } });
    // No worker to make its jobs: no set, nothing to approve; approved once they exist.
    await h.stopWorker();
    const stalled = `approved-no-set-${RUN}`;
    try {
      expect((await h.request('POST', '/alterations/submit', { key: submitter, body: body(stalled) })).status).toBe(
        202,
      );
      const refused = await h.request('POST', `/alterations/${stalled}/approve`, { key: approver, body: {} });
      expect(refused.status).toBe(409);
      expect(refused.body.detail).toContain('still fixing its instance set');
      expect((await plan(stalled)).plan).toMatchObject({ status: 8, approval: { state: 'Pending' } });
    } finally {
      await h.startWorker();
    }
    await eventually(async () => ((await plan(stalled)).plan.jobCounts.total === 2 ? true : undefined), 'its jobs');
    expect((await h.request('POST', `/alterations/${stalled}/approve`, { key: approver, body: {} })).status).toBe(202);
    expect((await finished(stalled)).plan.status).toBe(4);
  }, 120_000);

  it('a plan that needed no approval has no drift', async () => {
    const [id] = await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 1,
      tenantId: TENANT,
      variables: { amount: 0 },
    });
    const r = await h.request('POST', '/alterations/submit', {
      key: submitter,
      body: {
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 1 }],
        filter: { workflowInstanceIds: [id] },
      },
    });
    expect(r.status).toBe(202);
    const done = await finished(r.body.planId as string);
    expect(done.plan.drift).toBeNull();
    expect(done.plan.jobCounts.skipped).toBe(0);
  });
});
