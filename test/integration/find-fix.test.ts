import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceWorkflowId } from '../../src/temporal/names.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { chain, fault, orderApproval, writeLine } from '../support/workflows.js';

/**
 * Find what is broken and where (incident groups, activity counts, the incident and plan-job filters), retry
 * what a plan did not get done, and an instance's changes: on real Postgres and Temporal, over HTTP.
 */
let h: Harness;

const GATEWAY = 'Payment gateway timed out';
/** Longer than a group's 200 characters: its group holds its first 200. */
const DISK = `Disk full on /var/spool/refunds: ${'x'.repeat(240)}`;

const ids: Record<'payments' | 'refunds' | 'orders', string[]> = { payments: [], refunds: [], orders: [] };

async function start(definitionId: string): Promise<string> {
  const r = await h.request('POST', '/workflow-instances', { body: { definitionId } });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.workflowInstanceId as string;
}

const dryRun = (filter: unknown, key?: string) =>
  h.request('POST', '/alterations/dry-run', { body: filter, ...(key ? { key } : {}) });

async function matched(filter: unknown): Promise<string[]> {
  const r = await dryRun(filter);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return [...(r.body.workflowInstanceIds as string[])].sort();
}

async function submit(body: Record<string, unknown>): Promise<string> {
  const r = await h.request('POST', '/alterations/submit', { body });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.planId as string;
}

async function finished(planId: string) {
  return eventually(async () => {
    const r = await h.request('GET', `/alterations/${planId}`);
    return [4, 5, 6].includes(r.body.plan?.status) ? r.body : undefined;
  }, `plan ${planId} to finish`);
}

const sorted = (list: string[]) => [...list].sort();
/** Plan ids of this run (a Temporal server kept between runs remembers a plan workflow's id). */
const RUN = Date.now().toString(36);
const PLAN = `cancel-waits-${RUN}`;
const RETRY = `cancel-waits-again-${RUN}`;

beforeAll(async () => {
  h = await createHarness();
  for (const body of [
    chain('payments', [writeLine('start', 'charging'), fault('charge', GATEWAY)]),
    chain('refunds', [writeLine('start', 'refunding'), fault('refund', DISK)]),
    orderApproval('orders'),
  ]) {
    const r = await h.request('POST', '/workflow-definitions', { body });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
  // Each instance runs its pure steps as it is stored: payments and refunds fault at once, orders wait.
  for (let i = 0; i < 6; i++) ids.payments.push(await start('payments'));
  for (let i = 0; i < 2; i++) ids.refunds.push(await start('refunds'));
  for (let i = 0; i < 3; i++) ids.orders.push(await start('orders'));
});
afterAll(() => h?.close());

describe('what is broken, and where', () => {
  it('groups the open incidents by definition, version, activity and message, largest first, and pages them', async () => {
    const r = await h.request('GET', '/workflow-instances/incidents');
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.items).toEqual([
      {
        definitionId: 'payments',
        version: 1,
        activityId: 'charge',
        activityType: 'Elsa.Fault',
        message: GATEWAY,
        count: 6,
        firstAt: expect.any(String),
        lastAt: expect.any(String),
        sampleInstanceIds: expect.any(Array),
      },
      {
        definitionId: 'refunds',
        version: 1,
        activityId: 'refund',
        activityType: 'Elsa.Fault',
        message: DISK.slice(0, 200),
        count: 2,
        firstAt: expect.any(String),
        lastAt: expect.any(String),
        sampleInstanceIds: expect.any(Array),
      },
    ]);
    expect(r.body.nextCursor).toBeNull();
    const [payments, refunds] = r.body.items;
    // At most five samples, each an instance of the group, the latest to fault first.
    expect(payments.sampleInstanceIds).toHaveLength(5);
    for (const id of payments.sampleInstanceIds) expect(ids.payments).toContain(id);
    expect(sorted(refunds.sampleInstanceIds)).toEqual(sorted(ids.refunds));
    expect(payments.firstAt <= payments.lastAt).toBe(true);

    // A page of one, then the next: the same groups in the same order.
    const first = await h.request('GET', '/workflow-instances/incidents?limit=1');
    expect(first.body.items.map((g: { definitionId: string }) => g.definitionId)).toEqual(['payments']);
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const second = await h.request(
      'GET',
      `/workflow-instances/incidents?limit=1&after=${encodeURIComponent(first.body.nextCursor)}`,
    );
    expect(second.body.items.map((g: { definitionId: string }) => g.definitionId)).toEqual(['refunds']);
    expect(second.body.nextCursor).toBeNull();

    // One definition's groups; a forged cursor and a limit out of range are 400s.
    const only = await h.request('GET', '/workflow-instances/incidents?definitionId=refunds');
    expect(only.body.items.map((g: { count: number }) => g.count)).toEqual([2]);
    expect((await h.request('GET', '/workflow-instances/incidents?after=bogus')).status).toBe(400);
    expect((await h.request('GET', '/workflow-instances/incidents?limit=101')).status).toBe(400);

    // Another tenant sees none of them.
    const other = await h.keyWith(['workflows/instances:view'], 'tenant-b');
    const theirs = await h.request('GET', '/workflow-instances/incidents', { key: other });
    expect(theirs.body.items).toEqual([]);
  });

  it("counts a version's unfinished instances per activity: waiting, scheduled, faulted, every activity listed", async () => {
    const orders = await h.request('GET', '/workflow-definitions/orders/activity-counts');
    expect(orders.status, JSON.stringify(orders.body)).toBe(200);
    expect(orders.body).toEqual({
      definitionId: 'orders',
      version: 1,
      items: [
        { activityId: 'start', type: 'Elsa.WriteLine', name: null, waiting: 0, scheduled: 0, faulted: 0 },
        { activityId: 'wait', type: 'Elsa.Event', name: null, waiting: 3, scheduled: 0, faulted: 0 },
      ],
    });
    const payments = await h.request('GET', '/workflow-definitions/payments/activity-counts?version=1');
    expect(payments.body.items).toEqual([
      { activityId: 'start', type: 'Elsa.WriteLine', name: null, waiting: 0, scheduled: 0, faulted: 0 },
      { activityId: 'charge', type: 'Elsa.Fault', name: null, waiting: 0, scheduled: 0, faulted: 6 },
    ]);
    expect((await h.request('GET', '/workflow-definitions/payments/activity-counts?version=9')).status).toBe(404);
    expect((await h.request('GET', '/workflow-definitions/nothing/activity-counts')).status).toBe(404);
    const other = await h.keyWith(['workflows/instances:view'], 'tenant-b');
    expect((await h.request('GET', '/workflow-definitions/orders/activity-counts', { key: other })).status).toBe(404);
  });

  it('selects instances by their incidents: each entry matched by one incident, the message case-insensitively', async () => {
    expect(await matched({ incidentFilters: [{ messageContains: 'GATEWAY timed' }] })).toEqual(sorted(ids.payments));
    expect(await matched({ incidentFilters: [{ activityId: 'refund', activityType: 'Elsa.Fault' }] })).toEqual(
      sorted(ids.refunds),
    );
    expect(await matched({ incidentFilters: [{}] })).toEqual(sorted([...ids.payments, ...ids.refunds]));
    // Both entries must match: no instance has both incidents.
    expect(await matched({ incidentFilters: [{ activityId: 'refund' }, { activityId: 'charge' }] })).toEqual([]);
    // LIKE's wildcards are literal.
    expect(await matched({ incidentFilters: [{ messageContains: '%' }] })).toEqual([]);

    const long = await dryRun({ incidentFilters: [{ messageContains: 'x'.repeat(201) }] });
    expect(long.status).toBe(400);
    expect(long.body.errors.map((e: { path: string }) => e.path)).toContain('/incidentFilters/0/messageContains');
  });
});

describe('retry what did not work', () => {
  let planId: string;

  it("selects a plan's jobs' instances by job status, and refuses a plan the tenant does not have", async () => {
    // "wait" is an activity of orders only: the payments' jobs fail.
    planId = await submit({
      id: PLAN,
      alterations: [{ type: 'CancelActivity', activityId: 'wait' }],
      filter: { definitionIds: ['orders', 'payments'] },
    });
    const view = await finished(planId);
    expect(view.plan.jobCounts).toMatchObject({ total: 9, completed: 3, failed: 6 });

    expect(await matched({ planJobs: { planId, statuses: ['Failed'] } })).toEqual(sorted(ids.payments));
    expect(await matched({ planJobs: { planId, statuses: ['Completed'] } })).toEqual(sorted(ids.orders));
    expect(await matched({ planJobs: { planId } })).toEqual(sorted([...ids.orders, ...ids.payments]));
    expect(await matched({ planJobs: { planId, statuses: ['Pending'] } })).toEqual([]);
    // A plan without verify has no verification: a filter by one never takes its completed jobs.
    expect(await matched({ planJobs: { planId, statuses: ['Completed'], verifications: ['Unverified'] } })).toEqual([]);
    expect(
      await matched({ planJobs: { planId, statuses: ['Failed', 'Completed'], verifications: ['Unverified'] } }),
    ).toEqual(sorted(ids.payments));
    // With the other fields, AND as ever.
    expect(await matched({ planJobs: { planId }, definitionIds: ['orders'] })).toEqual(sorted(ids.orders));

    const unknown = await dryRun({ planJobs: { planId: 'no-such-plan' } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors).toEqual([{ path: '/planJobs/planId', message: 'Not a plan of this tenant' }]);
    // Another tenant's plan is as unknown as none.
    const other = await h.keyWith(['alterations:execute'], 'tenant-b');
    const theirs = await dryRun({ planJobs: { planId } }, other);
    expect(theirs.status).toBe(400);
    expect(theirs.body.errors).toEqual(unknown.body.errors);
    const submitted = await h.request('POST', '/alterations/submit', {
      body: { alterations: [{ type: 'Cancel' }], filter: { planJobs: { planId: 'no-such-plan' } } },
    });
    expect(submitted.status).toBe(400);
    expect(submitted.body.errors).toEqual([{ path: '/filter/planJobs/planId', message: 'Not a plan of this tenant' }]);
  });

  it('retries exactly the failed jobs as a new plan that names the plan it retries', async () => {
    const r = await h.request('POST', `/alterations/${planId}/retry-failed`, { body: { id: RETRY } });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    expect(r.body).toEqual({ planId: RETRY });
    const retry = await finished(RETRY);
    expect(retry.plan).toMatchObject({
      retryOf: planId,
      alterations: [{ type: 'CancelActivity', activityId: 'wait' }],
      workflowInstanceFilter: { planJobs: { planId, statuses: ['Failed'] } },
    });
    expect(retry.plan.jobCounts).toMatchObject({ total: 6, failed: 6 });
    const jobs = await h.request('GET', `/alterations/${RETRY}/jobs?limit=100`);
    expect(sorted(jobs.body.items.map((j: { workflowInstanceId: string }) => j.workflowInstanceId))).toEqual(
      sorted(ids.payments),
    );
    // The same id and body again is the same plan (idempotent).
    const again = await h.request('POST', `/alterations/${planId}/retry-failed`, {
      body: { id: RETRY },
    });
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ planId: RETRY });
  });

  it('refuses a retry of a plan with nothing failed, of one not finished, and of an unknown one', async () => {
    const fresh = await start('orders');
    const clean = await submit({
      alterations: [{ type: 'ModifyVariable', variableId: 'approved', value: true }],
      filter: { workflowInstanceIds: [fresh] },
    });
    await finished(clean);
    const nothing = await h.request('POST', `/alterations/${clean}/retry-failed`, { body: {} });
    expect(nothing.status).toBe(409);
    expect(nothing.body.detail).toMatch(/nothing left to retry/);
    const only = await h.request('POST', `/alterations/${planId}/retry-failed`, { body: { include: ['Unverified'] } });
    expect(only.status).toBe(409);

    const later = await submit({
      alterations: [{ type: 'ModifyVariable', variableId: 'approved', value: true }],
      filter: { workflowInstanceIds: [fresh] },
      schedule: { notBefore: new Date(Date.now() + 3_600_000).toISOString() },
    });
    const early = await h.request('POST', `/alterations/${later}/retry-failed`, { body: {} });
    expect(early.status).toBe(409);
    expect(early.body.detail).toMatch(/not finished/);
    expect((await h.request('POST', `/alterations/${later}/cancel`, { body: {} })).status).toBe(202);

    expect((await h.request('POST', '/alterations/no-such-plan/retry-failed', { body: {} })).status).toBe(404);
    const bad = await h.request('POST', `/alterations/${planId}/retry-failed`, { body: { include: ['Skipped'] } });
    expect(bad.status).toBe(400);
  });
});

describe('what happened to an instance', () => {
  it('lists the jobs that touched it, newest first, with their plans, statuses and logs, a page at a time', async () => {
    const order = await h.request('GET', `/workflow-instances/${ids.orders[2]}/alterations`);
    expect(order.status, JSON.stringify(order.body)).toBe(200);
    expect(order.body).toEqual({
      items: [
        {
          planId: PLAN,
          jobId: expect.any(String),
          status: 2,
          verification: null,
          alterationTypes: ['CancelActivity'],
          log: [expect.objectContaining({ message: 'CancelActivity succeeded', logLevel: 2 })],
          completedAt: expect.any(String),
        },
      ],
      nextCursor: null,
    });

    // A payment: failed twice, the retry first; a page of one at a time.
    const payment = ids.payments[0]!;
    const first = await h.request('GET', `/workflow-instances/${payment}/alterations?limit=1`);
    expect(first.body.items.map((c: { planId: string; status: number }) => [c.planId, c.status])).toEqual([[RETRY, 3]]);
    expect(first.body.items[0].log[0]).toMatchObject({ logLevel: 4, message: 'Activity with ID wait not found' });
    const second = await h.request(
      'GET',
      `/workflow-instances/${payment}/alterations?limit=1&after=${encodeURIComponent(first.body.nextCursor)}`,
    );
    expect(second.body.items.map((c: { planId: string }) => c.planId)).toEqual([PLAN]);
    expect(second.body.nextCursor).toBeNull();

    // The workflows of the instances the plan changed name it in AlterationPlanIds (the payments' jobs failed:
    // their instances were not changed, and their workflows were told nothing).
    const listed = await eventually(async () => {
      const found: string[] = [];
      for await (const w of h.client.workflow.list({ query: `AlterationPlanIds = "${PLAN}"` }))
        found.push(w.workflowId);
      return found.length >= ids.orders.length ? found.sort() : undefined;
    }, 'the plan in AlterationPlanIds of its instances');
    expect(listed).toEqual(sorted(ids.orders.map(instanceWorkflowId)));

    // An instance no plan touched: none. Unknown, or another tenant's: 404.
    expect((await h.request('GET', `/workflow-instances/${ids.refunds[0]}/alterations`)).body.items).toEqual([]);
    expect((await h.request('GET', '/workflow-instances/nope/alterations')).status).toBe(404);
    const other = await h.keyWith(['workflows/instances:view'], 'tenant-b');
    expect((await h.request('GET', `/workflow-instances/${payment}/alterations`, { key: other })).status).toBe(404);
  });
});

describe('retry with a schedule', () => {
  it("keeps the plan's maintenance windows for its retry", async () => {
    const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);
    const DAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
    // Open now: from an hour ago to two hours ahead, every day (past midnight, it ends the next day).
    const windows = [
      { days: DAYS, from: hhmm(Date.now() - 3_600_000), to: hhmm(Date.now() + 7_200_000), timeZone: 'UTC' },
    ];
    const windowed = await submit({
      alterations: [{ type: 'CancelActivity', activityId: 'wait' }],
      filter: { definitionIds: ['payments'] },
      schedule: { windows },
    });
    expect((await finished(windowed)).plan.jobCounts.failed).toBeGreaterThan(0);
    const r = await h.request('POST', `/alterations/${windowed}/retry-failed`, { body: {} });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const retry = await h.request('GET', `/alterations/${r.body.planId}`);
    expect(retry.body.plan.schedule).toMatchObject({ windows });
  });
});
