import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { submitPlan } from '../../src/alterations/plans.js';
import { createLogger } from '../../src/logger.js';
import { startPendingPlans } from '../../src/temporal/plans.js';
import { alterationPlan } from '../../workflows/index.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote, chain, event, writeLine } from '../support/workflows.js';

let h: Harness;
// Plan ids are also Temporal workflow ids, and a Temporal server (TEMPORAL_ADDRESS) may outlive one test run.
const run = Math.random().toString(36).slice(2, 8);
let versionId: string;

const definition = (definitionId: string, doneText = 'done') => approvalWithNote(definitionId, doneText);

const setAmount = (value: unknown) => [{ type: 'ModifyVariable', variableId: 'amount', value }];

async function publish(body: unknown) {
  const r = await h.request('POST', '/workflow-definitions', { body });
  expect(r.status).toBe(201);
  return r.body as { id: string; version: number };
}

async function submit(body: unknown, key?: string) {
  const r = await h.request('POST', '/alterations/submit', { body, ...(key ? { key } : {}) });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.planId as string;
}

async function waitForPlan(planId: string, status = 4, timeoutMs = 30_000) {
  return eventually(
    async () => {
      const r = await h.request('GET', `/alterations/${planId}`);
      return r.body.plan?.status === status ? r.body : undefined;
    },
    `plan ${planId} to reach status ${status}`,
    timeoutMs,
  );
}

async function startSuspended(definitionId: string) {
  const r = await h.request('POST', '/workflow-instances', { body: { definitionId } });
  const id = r.body.workflowInstanceId as string;
  await eventually(
    async () =>
      (await h.request('GET', `/workflow-instances/${id}`)).body.subStatus === 'Suspended' ? true : undefined,
    'suspension',
  );
  return id;
}

const amountOf = async (ids: string[]) => {
  const { rows } = await h.pool.query<{ id: string; amount: unknown }>(
    "SELECT id, variables->'amount' AS amount FROM workflow_instances WHERE id = ANY($1::text[])",
    [ids],
  );
  return new Map(rows.map((r) => [r.id, r.amount]));
};

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 10, window: 2, batchesPerRun: 5 } });
  versionId = (await publish(definition('plan-def'))).id;
});
afterAll(() => h?.close());

describe('submitting and processing a plan', () => {
  it('stores the plan before answering, alters every matched instance once, and completes', async () => {
    const ids = await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 120,
      variables: { amount: 1 },
      namePrefix: 'main-',
    });
    const r = await h.request('POST', '/alterations/submit', {
      body: { alterations: setAmount(42), filter: { definitionIds: ['plan-def'], searchTerm: 'main-' } },
    });
    expect(r.status).toBe(202);
    const planId = r.body.planId as string;
    expect(r.headers.get('location')).toBe(`/alterations/${planId}`);
    const immediate = await h.request('GET', `/alterations/${planId}`);
    expect(immediate.status).toBe(200);
    expect(immediate.body.plan).toMatchObject({
      id: planId,
      alterations: setAmount(42),
      workflowInstanceFilter: { definitionIds: ['plan-def'], searchTerm: 'main-' },
      createdAt: expect.any(String),
    });

    const body = await waitForPlan(planId);
    expect(body.plan.jobCounts).toEqual({
      total: 120,
      pending: 0,
      running: 0,
      completed: 120,
      failed: 0,
      cancelled: 0,
      skipped: 0,
    });
    expect(Date.parse(body.plan.startedAt)).toBeGreaterThanOrEqual(Date.parse(body.plan.createdAt));
    expect(Date.parse(body.plan.completedAt)).toBeGreaterThanOrEqual(Date.parse(body.plan.startedAt));
    expect(body.jobs.map((j: { workflowInstanceId: string }) => j.workflowInstanceId)).toEqual(ids);
    for (const job of body.jobs) {
      expect(job).toMatchObject({ planId, status: 2, startedAt: expect.any(String), completedAt: expect.any(String) });
      expect(job.log).toEqual([
        {
          message: 'ModifyVariable succeeded',
          logLevel: 2,
          timestamp: expect.any(String),
          eventName: 'Alteration ModifyVariable succeeded',
        },
      ]);
    }
    // Job ids are unique and sort in creation order.
    const jobIds = body.jobs.map((j: { id: string }) => j.id);
    expect(new Set(jobIds).size).toBe(120);
    expect([...jobIds].sort()).toEqual(jobIds);
    expect([...(await amountOf(ids)).values()].every((v) => v === 42)).toBe(true);

    // 12 batches at 5 per run: the workflow continued as new, each run's history small.
    const runs = await eventually(async () => {
      const found = [];
      for await (const w of h.client.workflow.list({ query: `WorkflowId = "alteration-plan-${planId}"` }))
        found.push(w);
      return found.length >= 3 ? found : undefined;
    }, 'the plan workflow runs to be listed');
    expect(runs).toHaveLength(3);
    // The Temporal UI shows what the plan is about.
    expect(
      await h.client.workflow
        .getHandle(`alteration-plan-${planId}`)
        .describe()
        .then((d) => d.memo),
    ).toEqual({
      tenantId: null,
      alterations: ['ModifyVariable'],
    });
    for (const run of runs) {
      const history = await h.client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
      expect(history.events!.length).toBeLessThan(100);
    }
  });

  it('completes a plan that matches nothing, with no jobs', async () => {
    const planId = await submit({ alterations: setAmount(1), filter: { names: ['nobody'] } });
    const body = await waitForPlan(planId);
    expect(body.jobs).toEqual([]);
    expect(body.plan.jobCounts.total).toBe(0);
    expect(body.plan.completedAt).not.toBeNull();
    const empty = await waitForPlan(await submit({ alterations: setAmount(1), filter: {} }));
    expect(empty.jobs).toEqual([]);
  });

  it('completes a plan whose jobs partly fail, each failed job saying why', async () => {
    const other = await publish(chain('no-amount', [writeLine('start', 'x'), event('wait', 'approve')]));
    const good = await seedInstances(h.pool, { definitionVersionId: versionId, count: 15, namePrefix: 'mixed-' });
    const bad = await seedInstances(h.pool, { definitionVersionId: other.id, count: 5, namePrefix: 'mixed-' });
    const planId = await submit({
      alterations: [...setAmount(7), { type: 'ModifyVariable', variableId: 'note', value: 'x' }],
      filter: { searchTerm: 'mixed-' },
    });
    const body = await waitForPlan(planId);
    expect(body.plan.jobCounts).toMatchObject({ total: 20, completed: 15, failed: 5 });
    for (const job of body.jobs.filter((j: { workflowInstanceId: string }) => bad.includes(j.workflowInstanceId))) {
      expect(job.status).toBe(3);
      expect(job.log).toEqual([
        {
          message: 'Variable with ID amount not found',
          logLevel: 4,
          timestamp: expect.any(String),
          eventName: 'Alteration ModifyVariable failed',
        },
      ]);
    }
    for (const job of body.jobs.filter((j: { workflowInstanceId: string }) => good.includes(j.workflowInstanceId))) {
      expect(job.log.map((l: { message: string }) => l.message)).toEqual([
        'ModifyVariable succeeded',
        'ModifyVariable succeeded',
      ]);
    }
  });

  it('migrates suspended instances, which then resume on the new version, and dispatches scheduled work', async () => {
    await publish(definition('migrating', 'v1 done'));
    const a = await startSuspended('migrating');
    const b = await startSuspended('migrating');
    const v2 = await publish(definition('migrating', 'v2 done'));
    const planId = await submit({
      alterations: [
        { type: 'Migrate', targetVersion: v2.version },
        { type: 'ScheduleActivity', activityId: 'note' },
      ],
      filter: { workflowInstanceIds: [a, b] },
    });
    await waitForPlan(planId);
    for (const id of [a, b]) {
      // The scheduled "note" ran on dispatch; the instance is suspended again at "wait".
      await eventually(async () => {
        const i = (await h.request('GET', `/workflow-instances/${id}`)).body;
        return i.version === 2 && i.subStatus === 'Suspended' && i.journal.length === 2 ? i : undefined;
      }, 'the migrated instance to run its scheduled activity');
    }
    // The search text follows the instance to its new definition version.
    const found = await h.request('POST', '/alterations/dry-run', { body: { searchTerm: v2.id.toUpperCase() } });
    expect(found.body.workflowInstanceIds).toEqual([a, b]);
    const trigger = await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: a } });
    expect(trigger.body.resumedWorkflowInstanceIds).toEqual([a]);
    const finished = await eventually(async () => {
      const i = (await h.request('GET', `/workflow-instances/${a}`)).body;
      return i.status === 'Finished' ? i : undefined;
    }, 'the migrated instance to finish');
    expect(finished.journal.map((j: { message: string }) => j.message)).toEqual(['started', 'note written', 'v2 done']);
  });
});

describe('idempotent submit', () => {
  it('returns the same plan for the same id and body, and 409 for another body or tenant', async () => {
    await seedInstances(h.pool, { definitionVersionId: versionId, count: 3, namePrefix: 'idem-' });
    const body = { id: `nightly-fix-1-${run}`, alterations: setAmount(3), filter: { searchTerm: 'idem-' } };
    expect(await submit(body)).toBe(`nightly-fix-1-${run}`);
    await waitForPlan(`nightly-fix-1-${run}`);
    // Same body, keys in another order: the same plan, nothing new started.
    const again = await h.request('POST', '/alterations/submit', {
      body: { filter: { searchTerm: 'idem-' }, alterations: setAmount(3), id: `nightly-fix-1-${run}` },
    });
    expect(again.status).toBe(202);
    expect(again.body.planId).toBe(`nightly-fix-1-${run}`);
    const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM alteration_jobs WHERE plan_id = $1', [
      `nightly-fix-1-${run}`,
    ]);
    expect(rows[0].n).toBe(3);
    const runs = [];
    for await (const w of h.client.workflow.list({ query: `WorkflowId = "alteration-plan-nightly-fix-1-${run}"` }))
      runs.push(w);
    expect(runs).toHaveLength(1);

    const different = await h.request('POST', '/alterations/submit', { body: { ...body, alterations: setAmount(4) } });
    expect(different.status).toBe(409);
    expect(different.headers.get('content-type')).toContain('application/problem+json');
    expect(different.body.detail).toBe(`Plan id nightly-fix-1-${run} is already used by a different plan`);
    const otherTenant = await h.request('POST', '/alterations/submit', {
      key: await h.keyWith(['alterations:execute'], 'tenant-b'),
      body,
    });
    expect(otherTenant.status).toBe(409);
    expect(otherTenant.body.detail).toBe(different.body.detail);

    const badId = await h.request('POST', '/alterations/submit', { body: { ...body, id: 'has space' } });
    expect(badId.status).toBe(400);
    expect(badId.body.errors[0].path).toBe('/id');
  });
});

describe('cancel', () => {
  it('cancels a plan before it starts: no job is generated', async () => {
    await h.stopWorker();
    try {
      const planId = await submit({ alterations: setAmount(9), filter: { definitionIds: ['plan-def'] } });
      const r = await h.request('POST', `/alterations/${planId}/cancel`);
      expect(r.status).toBe(202);
      expect(r.body).toEqual({ planId, status: 6 });
      await h.startWorker();
      await eventually(async () => {
        const d = await h.client.workflow.getHandle(`alteration-plan-${planId}`).describe();
        return d.status.name === 'COMPLETED' ? true : undefined;
      }, 'the plan workflow to end');
      const body = (await h.request('GET', `/alterations/${planId}`)).body;
      expect(body.plan.status).toBe(6);
      expect(body.jobs).toEqual([]);
      const { rows } = await h.pool.query(
        "SELECT count(*)::int AS n FROM workflow_instances WHERE variables->>'amount' = '9'",
      );
      expect(rows[0].n).toBe(0);
      expect((await h.request('POST', `/alterations/${planId}/cancel`)).status).toBe(409);
    } finally {
      await h.startWorker().catch(() => undefined);
    }
  });

  it('cancels a running plan: pending jobs are cancelled, finished ones stay, nothing runs after', async () => {
    const ids = await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 2000,
      variables: { amount: 0 },
      namePrefix: 'cancel-',
    });
    const planId = await submit({ alterations: setAmount(11), filter: { searchTerm: 'cancel-' } });
    await eventually(async () => {
      const p = (await h.request('GET', `/alterations/${planId}`)).body.plan;
      return p.jobCounts.completed > 0 ? true : undefined;
    }, 'the first jobs to complete');
    const r = await h.request('POST', `/alterations/${planId}/cancel`);
    expect(r.status).toBe(202);
    const after = (await h.request('GET', `/alterations/${planId}`)).body.plan;
    expect(after.status).toBe(6);
    expect(after.completedAt).not.toBeNull();
    expect(after.jobCounts.pending).toBe(0);
    expect(after.jobCounts.cancelled).toBeGreaterThan(0);
    expect(after.jobCounts.completed + after.jobCounts.cancelled).toBe(2000);
    // Nothing changes afterwards, and exactly the completed jobs' instances were altered.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const later = (await h.request('GET', `/alterations/${planId}`)).body.plan;
    expect(later.jobCounts).toEqual(after.jobCounts);
    const completed = new Set<string>();
    for (let cursor: string | null = null, first = true; first || cursor; first = false) {
      const page: { body: { items: { workflowInstanceId: string }[]; nextCursor: string | null } } = await h.request(
        'GET',
        `/alterations/${planId}/jobs?status=Completed&limit=1000${cursor ? `&after=${cursor}` : ''}`,
      );
      for (const j of page.body.items) completed.add(j.workflowInstanceId);
      cursor = page.body.nextCursor;
    }
    expect(completed.size).toBe(after.jobCounts.completed);
    const amounts = await amountOf(ids);
    for (const id of ids) expect(amounts.get(id)).toBe(completed.has(id) ? 11 : 0);
  });

  it('is a 404 for an unknown plan', async () => {
    expect((await h.request('POST', '/alterations/nope/cancel')).status).toBe(404);
  });
});

describe('reading plans and jobs', () => {
  it('pages jobs with a cursor and a status filter', async () => {
    await seedInstances(h.pool, { definitionVersionId: versionId, count: 5, namePrefix: 'page-' });
    const planId = await submit({ alterations: setAmount(5), filter: { searchTerm: 'page-' } });
    const full = await waitForPlan(planId);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r: { status: number; body: { items: { id: string }[]; nextCursor: string | null } } = await h.request(
        'GET',
        `/alterations/${planId}/jobs?limit=2${cursor ? `&after=${cursor}` : ''}`,
      );
      expect(r.status).toBe(200);
      expect(r.body.items.length).toBeLessThanOrEqual(2);
      seen.push(...r.body.items.map((j: { id: string }) => j.id));
      cursor = r.body.nextCursor;
    } while (cursor);
    expect(seen).toEqual(full.jobs.map((j: { id: string }) => j.id));
    expect((await h.request('GET', `/alterations/${planId}/jobs?status=2`)).body.items).toHaveLength(5);
    expect((await h.request('GET', `/alterations/${planId}/jobs?status=Failed`)).body.items).toHaveLength(0);
    const badStatus = await h.request('GET', `/alterations/${planId}/jobs?status=Done`);
    expect(badStatus.status).toBe(400);
    expect(badStatus.body.errors[0].path).toBe('/query/status');
    expect((await h.request('GET', `/alterations/${planId}/jobs?after=garbage`)).status).toBe(400);
    expect((await h.request('GET', `/alterations/${planId}/jobs?limit=1001`)).status).toBe(400);
    expect((await h.request('GET', '/alterations/nope/jobs')).status).toBe(404);
  });

  it("lists the tenant's plans newest first as summaries, by status, with a cursor; at most 100 a page", async () => {
    expect((await h.request('GET', '/alterations?limit=1000')).status).toBe(400);
    expect((await h.request('GET', '/alterations?limit=101')).status).toBe(400);
    expect((await h.request('GET', '/alterations?limit=0')).status).toBe(400);
    const all = await h.request('GET', '/alterations?limit=100');
    expect(all.status).toBe(200);
    expect(all.body.items.length).toBeGreaterThan(1);
    // Summaries: the plan without its filter, its alterations' types and count instead of the alterations
    // (a page of plans stays small whatever they hold).
    for (const p of all.body.items) {
      expect(p).not.toHaveProperty('workflowInstanceFilter');
      expect(p).not.toHaveProperty('alterations');
    }
    const one = await h.request('GET', `/alterations/${all.body.items[0].id}`);
    expect(one.body.plan).toHaveProperty('workflowInstanceFilter');
    const { workflowInstanceFilter: _f, alterations, ...summary } = one.body.plan;
    expect(all.body.items[0]).toEqual({
      ...summary,
      alterationTypes: [...new Set(alterations.map((a: { type: string }) => a.type))],
      alterationCount: alterations.length,
    });
    const defaults = await h.request('GET', '/alterations');
    expect(defaults.body.items.length).toBe(Math.min(20, all.body.items.length));
    const created = all.body.items.map((p: { createdAt: string }) => p.createdAt);
    expect([...created].sort().reverse()).toEqual(created);
    const first = await h.request('GET', '/alterations?limit=1');
    expect(first.body.items).toHaveLength(1);
    const second = await h.request('GET', `/alterations?limit=1&after=${first.body.nextCursor}`);
    expect(second.body.items[0].id).toBe(all.body.items[1].id);
    const cancelled = await h.request('GET', '/alterations?status=Cancelled');
    expect(cancelled.body.items.length).toBeGreaterThanOrEqual(2);
    expect(cancelled.body.items.every((p: { status: number }) => p.status === 6)).toBe(true);
    expect((await h.request('GET', '/alterations?status=6')).body.items).toHaveLength(cancelled.body.items.length);
    expect((await h.request('GET', '/alterations?status=Paused')).status).toBe(200);
    expect((await h.request('GET', '/alterations?status=Stopped')).status).toBe(400);
  });
});

describe('permissions and tenancy', () => {
  it('checks alterations:execute and alterations:view, and hides other tenants', async () => {
    const planId = await submit({ alterations: setAmount(1), filter: { names: ['nobody'] } });
    const viewer = await h.keyWith(['alterations:view']);
    const executor = await h.keyWith(['alterations:execute']);
    const submitAsViewer = await h.request('POST', '/alterations/submit', {
      key: viewer,
      body: { alterations: setAmount(1), filter: {} },
    });
    expect(submitAsViewer.status).toBe(403);
    expect(submitAsViewer.body.detail).toContain('alterations:execute');
    expect((await h.request('POST', '/alterations/dry-run', { key: viewer, body: {} })).status).toBe(403);
    expect((await h.request('POST', `/alterations/${planId}/cancel`, { key: viewer })).status).toBe(403);
    const readAsExecutor = await h.request('GET', `/alterations/${planId}`, { key: executor });
    expect(readAsExecutor.status).toBe(403);
    expect(readAsExecutor.body.detail).toContain('alterations:view');
    expect((await h.request('GET', `/alterations/${planId}`, { key: viewer })).status).toBe(200);
    expect((await h.request('GET', '/alterations', { key: await h.keyWith(['*:view']) })).status).toBe(200);
    expect(
      (await h.request('GET', `/alterations/${planId}`, { key: await h.keyWith(['read:alterations']) })).status,
    ).toBe(403);
    expect((await h.request('GET', `/alterations/${planId}`, { key: null })).status).toBe(401);

    const tenantB = await h.keyWith(['alterations:*'], 'tenant-b');
    expect((await h.request('GET', `/alterations/${planId}`, { key: tenantB })).status).toBe(404);
    expect((await h.request('GET', `/alterations/${planId}/jobs`, { key: tenantB })).status).toBe(404);
    expect((await h.request('POST', `/alterations/${planId}/cancel`, { key: tenantB })).status).toBe(404);
    expect((await h.request('GET', '/alterations', { key: tenantB })).body.items).toEqual([]);
  });

  it("never reaches another tenant's instances", async () => {
    const tenantB = await h.keyWith(['*'], 'tenant-b');
    const own = await h.request('POST', '/workflow-definitions', { key: tenantB, body: definition('plan-def') });
    const mine = await seedInstances(h.pool, { definitionVersionId: own.body.id, count: 4, tenantId: 'tenant-b' });
    const planId = await submit({ alterations: setAmount(77), filter: { emptyFilterSelectsAll: true } }, tenantB);
    const r = await eventually(async () => {
      const x = await h.request('GET', `/alterations/${planId}`, { key: tenantB });
      return x.body.plan.status === 4 ? x.body : undefined;
    }, 'the tenant-b plan');
    expect(r.jobs.map((j: { workflowInstanceId: string }) => j.workflowInstanceId)).toEqual(mine);
    const { rows } = await h.pool.query(
      "SELECT tenant_id, count(*)::int AS n FROM workflow_instances WHERE variables->>'amount' = '77' GROUP BY 1",
    );
    expect(rows).toEqual([{ tenant_id: 'tenant-b', n: 4 }]);
  });
});

describe('a plan that cannot be processed', () => {
  it('ends Failed, with the reason in the log, instead of retrying forever', async () => {
    // A stored plan whose filter no longer parses (as if written by an incompatible version).
    await h.pool.query(
      `INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, created_at)
       VALUES ($1, '', '[]', '{"statuses": ["Sleeping"]}', 'x', 0, now())`,
      [`broken-plan-${run}`],
    );
    await h.client.workflow.start(alterationPlan, {
      workflowId: `alteration-plan-broken-plan-${run}`,
      taskQueue: h.taskQueue,
      args: [{ planId: `broken-plan-${run}`, batchSize: 10, window: 1, batchesPerRun: 5 }],
    });
    const body = await waitForPlan(`broken-plan-${run}`, 5);
    expect(body.plan.completedAt).not.toBeNull();
    expect(body.jobs).toEqual([]);
    const { rows } = await h.pool.query('SELECT failure FROM alteration_plans WHERE id = $1', [`broken-plan-${run}`]);
    expect(rows[0].failure).toContain('statuses');
    expect(
      h.logs.some(
        (l) => l.msg === 'alteration plan failed: it could not be processed' && l.planId === `broken-plan-${run}`,
      ),
    ).toBe(true);
  });
});

describe('a plan stored but never started', () => {
  it('is started by resubmitting the same id and body', async () => {
    await seedInstances(h.pool, { definitionVersionId: versionId, count: 4, namePrefix: 'orphan-' });
    const body = { id: `orphaned-plan-${run}`, alterations: setAmount(21), filter: { searchTerm: 'orphan-' } };
    // As if the API stopped between storing the plan and starting its workflow.
    await submitPlan(h.pool, '', body as Parameters<typeof submitPlan>[2]);
    expect((await h.request('GET', `/alterations/orphaned-plan-${run}`)).body.plan.status).toBe(0);
    expect(await submit(body)).toBe(`orphaned-plan-${run}`);
    const done = await waitForPlan(`orphaned-plan-${run}`);
    expect(done.plan.jobCounts.completed).toBe(4);
  });

  it('is started by the next worker start', async () => {
    await seedInstances(h.pool, { definitionVersionId: versionId, count: 3, namePrefix: 'swept-' });
    await submitPlan(h.pool, '', {
      id: `swept-plan-${run}`,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 22 }],
      filter: { searchTerm: 'swept-' },
    });
    const started = await startPendingPlans(
      h.pool,
      h.client,
      { taskQueue: h.taskQueue, batchSize: 10, window: 1, batchesPerRun: 5 },
      createLogger('silent'),
    );
    expect(started).toContain(`swept-plan-${run}`);
    const done = await waitForPlan(`swept-plan-${run}`);
    expect(done.plan.jobCounts.completed).toBe(3);
    // The same memo as a plan the API starts.
    expect(
      await h.client.workflow
        .getHandle(`alteration-plan-swept-plan-${run}`)
        .describe()
        .then((d) => d.memo),
    ).toEqual({
      tenantId: null,
      alterations: ['ModifyVariable'],
    });
  });
});
