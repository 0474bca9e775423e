import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revertingPlanId } from '../../src/alterations/plan-store/index.js';
import { planWorkflowId } from '../../src/temporal/names.js';
import { progressQuery } from '../../workflows/alteration-plan.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote, connect, event, flowchart, writeLine } from '../support/workflows.js';

/**
 * Plan governance (contract section 10) end to end, on real Postgres and Temporal: the tenant's approval
 * policy, plans awaiting approval (status 8) that touch nothing, four eyes (a user, a key that user made,
 * the same key), approve / reject / withdraw, expiry on a durable timer across a worker restart, the stored
 * plan's preview, and Migrate with activity mappings (with its draft, preview and revert).
 *
 * The expiry needs the policy's shortest TTL (60 s, which the database enforces too): its plan is submitted
 * in another tenant first and checked by the last test, so the wait overlaps the other tests.
 */
let h: Harness;
const run = Math.random().toString(36).slice(2, 8);
const definitionId = `gov-${run}`;
let versionId: string;
let seq = 0;

const SELF_APPROVAL = 'A plan cannot be approved by the principal that submitted it';
const NOT_AWAITING = /is not awaiting approval/;

/** Principals: two users with their bearer tokens, a key user A made, a key of its own (no maker), a viewer. */
interface Principals {
  alice: { id: string; token: string };
  bob: { id: string; token: string };
  /** Made by alice through the API: four eyes count it as alice. */
  aliceKey: { id: string; key: string };
  /** Made by the harness (no maker): stands for itself; may create keys. */
  robot: { id: string; key: string };
  /** alterations:execute and :view, not :approve. */
  executor: string;
  /**
   * Made by the harness (no maker), with alterations:approve: it decides the harness admin key's plans (bob cannot:
   * the admin key made him, and four eyes refuse a principal its submitter created).
   */
  approver: string;
}
let p: Principals;

// The expiry plan (tenant of its own, policy always with the minimum TTL), submitted in beforeAll.
const expiryTenant = `gov-expiry-${run}`;
let expiryKey: string;
let expiryPlanId: string;
let expiryInstances: string[];

const bearer = (token: string) => ({ key: null, headers: { authorization: `Bearer ${token}` } });
const asKey = (key: string) => ({ key });

async function createUser(name: string, permissions: string[]) {
  const created = await h.request('POST', '/identity/users', {
    body: { name, password: 'pass-word-123', permissions },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const login = await h.request('POST', '/identity/login', {
    key: null,
    body: { username: name, password: 'pass-word-123' },
  });
  expect(login.status).toBe(200);
  return { id: created.body.id as string, token: login.body.accessToken as string };
}

async function createKey(as: { key?: string | null; headers?: Record<string, string> }, permissions: string[]) {
  const r = await h.request('POST', '/identity/api-keys', {
    ...as,
    body: { name: `gov key ${++seq}`, permissions },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return { id: r.body.id as string, key: r.body.key as string };
}

/** Instances of the test's definition, found by a name prefix of their own. */
async function seed(count: number, tenant?: { tenantId: string; versionId: string }) {
  const prefix = `${run}x${++seq}x`;
  const ids = await seedInstances(h.pool, {
    definitionVersionId: tenant?.versionId ?? versionId,
    count,
    variables: { amount: 0 },
    namePrefix: prefix,
    ...(tenant ? { tenantId: tenant.tenantId } : {}),
  });
  return { ids, filter: { searchTerm: prefix } };
}

const setAmount = (value: number) => [{ type: 'ModifyVariable', variableId: 'amount', value }];

async function submit(
  body: Record<string, unknown>,
  as: { key?: string | null; headers?: Record<string, string> } = {},
): Promise<string> {
  const r = await h.request('POST', '/alterations/submit', { ...as, body });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.planId as string;
}

const view = async (planId: string, key?: string) => {
  const r = await h.request('GET', `/alterations/${planId}`, key ? { key } : {});
  expect(r.status).toBe(200);
  return r.body as { plan: Record<string, any>; jobs: unknown[] };
};

const untilPlan = (
  planId: string,
  ok: (plan: Record<string, any>) => boolean,
  what: string,
  timeoutMs = 30_000,
  key?: string,
) =>
  eventually(
    async () => {
      const { plan } = await view(planId, key);
      return ok(plan) ? plan : undefined;
    },
    `plan ${planId} ${what}`,
    timeoutMs,
  );

/** Job rows and job sets the plan has in the database (a plan awaiting approval has neither). */
async function jobRows(planId: string): Promise<{ jobs: number; sets: number }> {
  const { rows } = await h.pool.query<{ jobs: number; sets: number }>(
    `SELECT (SELECT count(*)::int FROM alteration_jobs WHERE plan_id = $1) AS jobs,
            (SELECT count(*)::int FROM alteration_job_sets WHERE plan_id = $1) AS sets`,
    [planId],
  );
  return rows[0]!;
}

/** The instances' rows as stored (revision, variables, update time): a plan that touches none leaves them equal. */
async function instanceRows(ids: string[]) {
  const { rows } = await h.pool.query(
    'SELECT id, revision, variables, bookmarks, updated_at FROM workflow_instances WHERE id = ANY($1::text[]) ORDER BY id',
    [ids],
  );
  return rows;
}

async function amounts(ids: string[]): Promise<unknown[]> {
  const { rows } = await h.pool.query<{ amount: unknown }>(
    `SELECT variables -> 'amount' AS amount FROM workflow_instances WHERE id = ANY($1::text[]) ORDER BY id`,
    [ids],
  );
  return rows.map((r) => r.amount);
}

/** The plan workflow answers its progress query with this status (it started and got as far as waiting). */
const workflowStatus = (planId: string, status: string) =>
  eventually(async () => {
    const progress = await h.client.workflow.getHandle(planWorkflowId(planId)).query(progressQuery);
    return progress.status === status ? progress : undefined;
  }, `the workflow of plan ${planId} to say ${status}`);

/** The data of the first SSE event of GET /alterations/{planId}/events. */
async function firstEvent(planId: string): Promise<Record<string, unknown>> {
  const response = await h.app.request(`/alterations/${planId}/events`, {
    headers: { authorization: `ApiKey ${h.adminKey}` },
  });
  const reader = response.body!.getReader();
  let text = '';
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  await reader.cancel();
  const data = text.split('\n').find((l) => l.startsWith('data:'));
  return JSON.parse(data!.slice(5)) as Record<string, unknown>;
}

const approve = (planId: string, as: object, body: unknown = {}) =>
  h.request('POST', `/alterations/${planId}/approve`, { ...as, body });
const reject = (planId: string, as: object, body: unknown = {}) =>
  h.request('POST', `/alterations/${planId}/reject`, { ...as, body });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * Forgets the default tenant's changes made without approval in the last hour: each test that sets `above` counts
 * from nothing, whatever the tests before it changed.
 */
const freshBudget = () => h.pool.query("DELETE FROM unapproved_changes WHERE tenant_id = ''");
const NEVER = { approval: 'never', approvalThreshold: null, approvalTtlSeconds: 604_800 };

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 100, window: 2, batchesPerRun: 500 } });

  // The expiry plan first: its 60 s run while the other tests do.
  expiryKey = await h.keyWith(['*'], expiryTenant);
  const policy = await h.request('PUT', '/alterations/policy', {
    key: expiryKey,
    body: { approval: 'always', approvalThreshold: null, approvalTtlSeconds: 60 },
  });
  expect(policy.status, JSON.stringify(policy.body)).toBe(200);
  const tenantDef = await h.request('POST', '/workflow-definitions', {
    key: expiryKey,
    body: approvalWithNote(`expiry-${run}`),
  });
  expect(tenantDef.status).toBe(201);
  const seeded = await seed(2, { tenantId: expiryTenant, versionId: tenantDef.body.id });
  expiryInstances = seeded.ids;
  expiryPlanId = await submit({ alterations: setAmount(5), filter: seeded.filter }, asKey(expiryKey));

  const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote(definitionId) });
  expect(def.status).toBe(201);
  versionId = def.body.id;

  const alice = await createUser(`alice-${run}`, [
    'alterations:execute',
    'alterations:view',
    'alterations:approve',
    'identity/api-keys:create',
  ]);
  const bob = await createUser(`bob-${run}`, ['alterations:view', 'alterations:approve']);
  const aliceKey = await createKey(bearer(alice.token), [
    'alterations:execute',
    'alterations:view',
    'alterations:approve',
  ]);
  const robotKey = await h.keyWith([
    'alterations:execute',
    'alterations:view',
    'alterations:approve',
    'identity/api-keys:create',
  ]);
  // The harness does not say a key's id: the robot is the one key of the default tenant that may create keys.
  const robotId = (
    await h.pool.query<{ id: string }>(
      `SELECT id FROM api_keys WHERE tenant_id = '' AND 'identity/api-keys:create' = ANY(permissions) AND created_by IS NULL`,
    )
  ).rows[0]!.id;
  p = {
    alice,
    bob,
    aliceKey,
    robot: { id: robotId, key: robotKey },
    executor: await h.keyWith(['alterations:execute', 'alterations:view']),
    approver: await h.keyWith(['alterations:approve', 'alterations:view', 'workflows/instances:view']),
  };
}, 120_000);

afterAll(() => h?.close());

describe('the approval policy', () => {
  it('reads the default, and is set whole by a principal with alterations/policy:update', async () => {
    const initial = await h.request('GET', '/alterations/policy');
    expect(initial.status).toBe(200);
    expect(initial.body).toEqual(NEVER);

    const viewer = await h.keyWith(['alterations:view']);
    expect((await h.request('GET', '/alterations/policy', { key: viewer })).status).toBe(200);
    const denied = await h.request('PUT', '/alterations/policy', {
      key: viewer,
      body: { approval: 'always', approvalThreshold: null, approvalTtlSeconds: 3600 },
    });
    expect(denied.status).toBe(403);
    expect(denied.body.detail).toContain('alterations/policy:update');
    const blind = await h.keyWith(['workflows/definitions:view']);
    const unread = await h.request('GET', '/alterations/policy', { key: blind });
    expect(unread.status).toBe(403);
    expect(unread.body.detail).toContain('alterations:view');

    const setter = await h.keyWith(['alterations/policy:update', 'alterations:view']);
    for (const policy of [
      { approval: 'always', approvalThreshold: null, approvalTtlSeconds: 3600 },
      { approval: 'above', approvalThreshold: 250, approvalTtlSeconds: 60 },
      { approval: 'never', approvalThreshold: null, approvalTtlSeconds: 2_592_000 },
    ]) {
      const put = await h.request('PUT', '/alterations/policy', { key: setter, body: policy });
      expect(put.status, JSON.stringify(put.body)).toBe(200);
      expect(put.body).toEqual(policy);
      expect((await h.request('GET', '/alterations/policy')).body).toEqual(policy);
    }
    // Another tenant's policy is its own.
    expect((await h.request('GET', '/alterations/policy', { key: expiryKey })).body).toMatchObject({
      approval: 'always',
      approvalTtlSeconds: 60,
    });
    expect((await h.request('PUT', '/alterations/policy', { body: NEVER })).status).toBe(200);
  });

  it.each([
    [
      'above without a threshold',
      { approval: 'above', approvalThreshold: null, approvalTtlSeconds: 3600 },
      '/approvalThreshold',
    ],
    ['a threshold of 0', { approval: 'above', approvalThreshold: 0, approvalTtlSeconds: 3600 }, '/approvalThreshold'],
    [
      'a TTL under 60 s',
      { approval: 'always', approvalThreshold: null, approvalTtlSeconds: 59 },
      '/approvalTtlSeconds',
    ],
    [
      'a TTL over 30 days',
      { approval: 'always', approvalThreshold: null, approvalTtlSeconds: 2_592_001 },
      '/approvalTtlSeconds',
    ],
    ['an unknown approval', { approval: 'sometimes', approvalThreshold: null, approvalTtlSeconds: 3600 }, '/approval'],
    ['an unknown field', { ...NEVER, tenantId: 'other' }, ''],
  ])('refuses %s with a 400 naming the field', async (_what, body, path) => {
    const r = await h.request('PUT', '/alterations/policy', { body });
    expect(r.status).toBe(400);
    expect(r.headers.get('content-type')).toContain('application/problem+json');
    if (path) expect(r.body.errors.map((e: { path: string }) => e.path)).toContain(path);
    expect((await h.request('GET', '/alterations/policy')).body).toEqual(NEVER);
  });

  it('says a field left out is required (a threshold of null must be sent as null)', async () => {
    const r = await h.request('PUT', '/alterations/policy', { body: { approval: 'always' } });
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual(
      expect.arrayContaining([
        { path: '/approvalThreshold', message: 'Required: expected number' },
        { path: '/approvalTtlSeconds', message: 'Required: expected number' },
      ]),
    );
  });
});

describe('a plan that asks for approval', () => {
  it('waits with status 8 and its jobs, touching no instance: listed by status 8, previewed as it would run', async () => {
    const { ids, filter } = await seed(3);
    const before = await instanceRows(ids);
    const planId = await submit(
      { alterations: setAmount(7), filter, approval: { required: true } },
      bearer(p.alice.token),
    );
    await workflowStatus(planId, 'AwaitingApproval');

    // Its jobs are made, Pending: the set the approver reads is the set that runs.
    const { plan, jobs } = await untilPlan(planId, (pl) => pl.jobCounts.total === 3, 'to have its jobs').then(() =>
      view(planId),
    );
    expect(plan.status).toBe(8);
    expect((jobs as { status: number; workflowInstanceId: string }[]).map((j) => j.status)).toEqual([0, 0, 0]);
    expect((jobs as { workflowInstanceId: string }[]).map((j) => j.workflowInstanceId).sort()).toEqual([...ids].sort());
    expect(plan.startedAt).toBeNull();
    expect(plan.jobCounts).toMatchObject({ total: 3, pending: 3, completed: 0, failed: 0 });
    expect(plan.approval).toEqual({
      state: 'Pending',
      requestedBy: { kind: 'user', id: p.alice.id, name: `alice-${run}` },
      matchedCount: 3,
      expiresAt: new Date(Date.parse(plan.createdAt) + 604_800_000).toISOString(),
      decidedBy: null,
      decidedAt: null,
      comment: null,
    });
    expect(plan.schedule).toBeNull();
    expect(plan.resumesAt).toBeNull();
    expect(await jobRows(planId)).toEqual({ jobs: 0, sets: 1 });
    expect(await instanceRows(ids)).toEqual(before);

    // Listed among the plans awaiting approval (by number and by name), with its approval.
    for (const status of ['8', 'AwaitingApproval']) {
      const list = await h.request('GET', `/alterations?status=${status}`);
      expect(list.status, JSON.stringify(list.body)).toBe(200);
      const item = list.body.items.find((i: { id: string }) => i.id === planId);
      expect(item, `status=${status}`).toMatchObject({ status: 8, approval: { state: 'Pending', matchedCount: 3 } });
      expect(list.body.items.every((i: { status: number }) => i.status === 8)).toBe(true);
    }
    expect((await h.request('GET', '/alterations?status=4')).body.items.map((i: { id: string }) => i.id)).not.toContain(
      planId,
    );
    expect(await firstEvent(planId)).toMatchObject({
      status: 8,
      resumesAt: null,
      approval: { state: 'Pending', decidedBy: null, decidedAt: null, comment: null },
    });

    // Temporal UI: found by its search attribute.
    await eventually(async () => {
      for await (const w of h.client.workflow.list({ query: `AlterationPlanStatus = "AwaitingApproval"` }))
        if (w.workflowId === planWorkflowId(planId)) return true;
      return undefined;
    }, 'the plan found by AlterationPlanStatus = "AwaitingApproval"');

    // The approver reads what it would do now; values only to a principal that may read instances.
    const preview = await h.request('GET', `/alterations/${planId}/preview`, asKey(p.approver));
    expect(preview.status).toBe(200);
    expect(preview.body.matchedCount).toBe(3);
    expect(preview.body.items.map((i: { workflowInstanceId: string }) => i.workflowInstanceId).sort()).toEqual(
      [...ids].sort(),
    );
    for (const item of preview.body.items) {
      expect(item.isSuccessful).toBe(true);
      expect(item.changes).toContainEqual({ path: '/variables/amount', before: 0, after: 7 });
    }
    const withoutValues = await h.request('GET', `/alterations/${planId}/preview`, asKey(p.executor));
    for (const item of withoutValues.body.items) expect(item.changes).toEqual([{ path: '/variables/amount' }]);
    expect((await h.request('GET', `/alterations/${planId}/preview?limit=1`)).body.items).toHaveLength(1);
    for (const limit of ['0', '101', 'x'])
      expect((await h.request('GET', `/alterations/${planId}/preview?limit=${limit}`)).status, limit).toBe(400);
    expect((await h.request('GET', `/alterations/missing-${run}/preview`)).status).toBe(404);
    expect(await instanceRows(ids)).toEqual(before);

    // Four eyes: the submitting user, a key that user made, and a principal without alterations:approve.
    const self = await approve(planId, bearer(p.alice.token), { comment: 'mine' });
    expect(self.status).toBe(403);
    expect(self.body.detail).toBe(SELF_APPROVAL);
    const ownKey = await approve(planId, asKey(p.aliceKey.key));
    expect(ownKey.status).toBe(403);
    expect(ownKey.body.detail).toBe(SELF_APPROVAL);
    const unauthorised = await approve(planId, asKey(p.executor));
    expect(unauthorised.status).toBe(403);
    expect(unauthorised.body.detail).toContain('alterations:approve');
    expect((await reject(planId, asKey(p.executor))).status).toBe(403);
    expect((await view(planId)).plan.status).toBe(8);

    // Another user approves: the plan runs and alters the instances.
    const approved = await approve(planId, bearer(p.bob.token), { comment: 'looks right' });
    expect(approved.status, JSON.stringify(approved.body)).toBe(202);
    expect(approved.body).toEqual({ planId, status: 0 });
    const done = await untilPlan(planId, (pl) => pl.status === 4, 'to complete');
    expect(done.jobCounts).toMatchObject({ total: 3, completed: 3, failed: 0 });
    expect(done.approval).toMatchObject({
      state: 'Approved',
      requestedBy: { kind: 'user', id: p.alice.id },
      matchedCount: 3,
      decidedBy: { kind: 'user', id: p.bob.id, name: `bob-${run}` },
      comment: 'looks right',
    });
    expect(Date.parse(done.approval.decidedAt)).toBeGreaterThanOrEqual(Date.parse(plan.createdAt));
    expect(await amounts(ids)).toEqual([7, 7, 7]);
    expect(await h.client.workflow.getHandle(planWorkflowId(planId)).result()).toMatchObject({
      status: 'Completed',
      completed: 3,
    });

    // Decided: neither decision again.
    const again = await approve(planId, bearer(p.bob.token));
    expect(again.status).toBe(409);
    expect(again.body.detail).toMatch(NOT_AWAITING);
    expect((await reject(planId, bearer(p.bob.token))).status).toBe(409);
  });

  it('is refused to the key that submitted it and to keys it made; a rejection cancels it and its jobs, none run', async () => {
    const { ids, filter } = await seed(2);
    const before = await instanceRows(ids);
    const planId = await submit(
      { alterations: setAmount(9), filter, approval: { required: true } },
      asKey(p.robot.key),
    );
    await workflowStatus(planId, 'AwaitingApproval');
    expect((await view(planId)).plan.approval.requestedBy).toMatchObject({ kind: 'apiKey', id: p.robot.id });

    const same = await approve(planId, asKey(p.robot.key));
    expect(same.status).toBe(403);
    expect(same.body.detail).toBe(SELF_APPROVAL);
    // A key the submitting key made stands for it.
    const child = await createKey(asKey(p.robot.key), ['alterations:approve']);
    const byChild = await approve(planId, asKey(child.key));
    expect(byChild.status).toBe(403);
    expect(byChild.body.detail).toBe(SELF_APPROVAL);

    const rejected = await reject(planId, asKey(p.aliceKey.key), { comment: 'not now' });
    expect(rejected.status, JSON.stringify(rejected.body)).toBe(202);
    expect(rejected.body).toEqual({ planId, status: 6 });
    const { plan, jobs } = await view(planId);
    expect(plan.status).toBe(6);
    expect(plan.completedAt).not.toBeNull();
    expect((jobs as { status: number }[]).map((j) => j.status)).toEqual([4, 4]);
    expect(plan.approval).toMatchObject({
      state: 'Rejected',
      decidedBy: { kind: 'apiKey', id: p.aliceKey.id },
      comment: 'not now',
    });
    expect(plan.approval.decidedAt).not.toBeNull();
    // The record says who withdrew it.
    expect(plan.approval.decidedBy).toMatchObject({ kind: 'apiKey', id: p.aliceKey.id });
    expect(await h.client.workflow.getHandle(planWorkflowId(planId)).result()).toMatchObject({ status: 'Cancelled' });
    expect(await jobRows(planId)).toEqual({ jobs: 0, sets: 1 });
    expect(await instanceRows(ids)).toEqual(before);

    expect((await approve(planId, bearer(p.bob.token))).status).toBe(409);
    expect((await reject(planId, bearer(p.bob.token))).status).toBe(409);
    expect((await h.request('POST', `/alterations/${planId}/cancel`)).status).toBe(409);
  });

  it('is refused to the user whose key submitted it, and withdrawn by its submitter with a cancel', async () => {
    const { ids, filter } = await seed(2);
    const before = await instanceRows(ids);
    const planId = await submit(
      { alterations: setAmount(11), filter, approval: { required: true } },
      asKey(p.aliceKey.key),
    );
    await workflowStatus(planId, 'AwaitingApproval');
    const byOwner = await approve(planId, bearer(p.alice.token));
    expect(byOwner.status).toBe(403);
    expect(byOwner.body.detail).toBe(SELF_APPROVAL);

    const withdrawn = await h.request('POST', `/alterations/${planId}/cancel`, asKey(p.aliceKey.key));
    expect(withdrawn.status).toBe(202);
    const { plan, jobs } = await view(planId);
    expect(plan.status).toBe(6);
    expect((jobs as { status: number }[]).map((j) => j.status)).toEqual([4, 4]);
    expect(plan.approval).toMatchObject({ state: 'Withdrawn', requestedBy: { kind: 'apiKey', id: p.aliceKey.id } });
    expect(plan.approval.decidedAt).not.toBeNull();
    // The record says who withdrew it.
    expect(plan.approval.decidedBy).toMatchObject({ kind: 'apiKey', id: p.aliceKey.id });
    expect(await h.client.workflow.getHandle(planWorkflowId(planId)).result()).toMatchObject({ status: 'Cancelled' });
    expect(await jobRows(planId)).toEqual({ jobs: 0, sets: 1 });
    expect(await instanceRows(ids)).toEqual(before);
    expect((await approve(planId, bearer(p.bob.token))).status).toBe(409);
  });

  it('approve and reject are 409 for a plan that needed no approval, 404 for an unknown one', async () => {
    const { ids, filter } = await seed(1);
    const planId = await submit({ alterations: setAmount(3), filter });
    const plan = await untilPlan(planId, (pl) => pl.status === 4, 'to complete');
    expect(plan.approval).toBeNull();
    expect(await amounts(ids)).toEqual([3]);
    for (const decide of [approve, reject]) {
      const r = await decide(planId, bearer(p.bob.token));
      expect(r.status).toBe(409);
      expect(r.body.detail).toMatch(NOT_AWAITING);
      expect((await decide(`missing-${run}`, bearer(p.bob.token))).status).toBe(404);
    }
    // Another tenant's plan awaiting approval is not found.
    expect((await approve(expiryPlanId, bearer(p.bob.token))).status).toBe(404);
  });
});

describe('the policy decides', () => {
  it('always: a plan without an approval request awaits approval, and cannot opt out', async () => {
    expect(
      (
        await h.request('PUT', '/alterations/policy', {
          body: { approval: 'always', approvalThreshold: null, approvalTtlSeconds: 3600 },
        })
      ).status,
    ).toBe(200);
    try {
      const { filter } = await seed(1);
      const plain = await submit({ alterations: setAmount(1), filter });
      const optOut = await submit({ alterations: setAmount(2), filter, approval: null });
      for (const planId of [plain, optOut]) {
        const { plan } = await view(planId);
        expect(plan.status).toBe(8);
        expect(plan.approval).toMatchObject({ state: 'Pending', matchedCount: 1 });
        expect(Date.parse(plan.approval.expiresAt) - Date.parse(plan.createdAt)).toBe(3_600_000);
      }
      const refused = await h.request('POST', '/alterations/submit', {
        body: { alterations: setAmount(2), filter, approval: { required: false } },
      });
      expect(refused.status).toBe(400);
      expect(refused.body.errors.map((e: { path: string }) => e.path)).toContain('/approval/required');
      for (const planId of [plain, optOut]) expect((await reject(planId, asKey(p.approver))).status).toBe(202);
    } finally {
      await h.request('PUT', '/alterations/policy', { body: NEVER });
    }
  });

  it('above: only a plan whose filter matches more than the threshold at submission awaits approval', async () => {
    expect(
      (
        await h.request('PUT', '/alterations/policy', {
          body: { approval: 'above', approvalThreshold: 3, approvalTtlSeconds: 3600 },
        })
      ).status,
    ).toBe(200);
    await freshBudget();
    try {
      const over = await seed(4);
      const under = await seed(3);
      const overId = await submit({ alterations: setAmount(4), filter: over.filter });
      const underId = await submit({ alterations: setAmount(4), filter: under.filter });
      await workflowStatus(overId, 'AwaitingApproval');
      const waiting = (await view(overId)).plan;
      expect(waiting.status).toBe(8);
      expect(waiting.approval).toMatchObject({ state: 'Pending', matchedCount: 4 });
      const ran = await untilPlan(underId, (pl) => pl.status === 4, 'to complete');
      expect(ran.approval).toBeNull();
      expect(await amounts(under.ids)).toEqual([4, 4, 4]);
      expect(await amounts(over.ids)).toEqual([0, 0, 0, 0]);
      expect(await jobRows(overId)).toEqual({ jobs: 0, sets: 1 });
      // Under the threshold, a submitter may still ask for review.
      const asked = await submit({ alterations: setAmount(5), filter: under.filter, approval: { required: true } });
      expect((await view(asked)).plan.approval).toMatchObject({ state: 'Pending', matchedCount: 3 });

      // The approved plan runs the set it was approved with.
      expect((await approve(overId, asKey(p.approver))).status).toBe(202);
      await untilPlan(overId, (pl) => pl.status === 4, 'to complete');
      expect(await amounts(over.ids)).toEqual([4, 4, 4, 4]);
      expect((await h.request('POST', `/alterations/${asked}/cancel`)).status).toBe(202);
    } finally {
      await h.request('PUT', '/alterations/policy', { body: NEVER });
    }
  });
});

describe('the policy holds when the jobs are made too', () => {
  /** A tenant of its own under `above 2`, with a definition and a principal of its own to approve. */
  async function aboveTwo() {
    const tenantId = `gov-gen-${run}-${++seq}`;
    const key = await h.keyWith(['*'], tenantId);
    const approver = await h.keyWith(['alterations:approve', 'alterations:view'], tenantId);
    const policy = await h.request('PUT', '/alterations/policy', {
      key,
      body: { approval: 'above', approvalThreshold: 2, approvalTtlSeconds: 3600 },
    });
    expect(policy.status).toBe(200);
    const def = await h.request('POST', '/workflow-definitions', { key, body: approvalWithNote(`gen-${run}-${seq}`) });
    expect(def.status).toBe(201);
    const more = (count: number) => seed(count, { tenantId, versionId: def.body.id });
    return { tenantId, key, approver, definitionId: def.body.definitionId as string, more };
  }

  it('holds a plan that matched nothing at submission and 5 instances when its window opened; approved, it runs those 5', async () => {
    const t = await aboveTwo();
    const notBefore = new Date(Date.now() + 3_000).toISOString();
    const planId = await submit(
      {
        alterations: setAmount(6),
        filter: { definitionIds: [t.definitionId] },
        schedule: { notBefore },
      },
      asKey(t.key),
    );
    expect((await view(planId, t.key)).plan.approval).toBeNull();
    const first = await t.more(5);
    const held = await untilPlan(planId, (pl) => pl.status === 8, 'to be held when its jobs are made', 30_000, t.key);
    expect(held.approval).toMatchObject({
      state: 'Pending',
      matchedCount: 5,
      requestedBy: { kind: 'apiKey' },
      heldBecause: "5 instances match, more than the policy's threshold of 2",
    });
    expect(held.jobCounts).toMatchObject({ total: 5, pending: 5, completed: 0 });
    expect(held.startedAt).toBeNull();
    await workflowStatus(planId, 'AwaitingApproval');
    expect(await amounts(first.ids)).toEqual([0, 0, 0, 0, 0]);
    // Instances that come to match while it waits are not added: the set approved is the set that runs.
    const later = await t.more(2);
    expect((await approve(planId, asKey(t.approver))).status).toBe(202);
    const done = await untilPlan(planId, (pl) => pl.status === 4, 'to complete', 30_000, t.key);
    expect(done.jobCounts).toMatchObject({ total: 5, completed: 5 });
    expect(await amounts(first.ids)).toEqual([6, 6, 6, 6, 6]);
    expect(await amounts(later.ids)).toEqual([0, 0]);
  });

  it('counts the changes made without approval over an hour: a split change is held like a whole one', async () => {
    const t = await aboveTwo();
    const { ids } = await t.more(6);
    const runNow = (workflowInstanceIds: string[]) =>
      h.request('POST', '/alterations/run', {
        key: t.key,
        body: { alterations: setAmount(1), workflowInstanceIds },
      });
    expect((await runNow(ids.slice(0, 2))).status).toBe(200);
    const second = await runNow(ids.slice(2, 4));
    expect(second.status).toBe(409);
    expect(second.body.detail).toContain(
      "2 instances, with the 2 the tenant changed without approval in the last hour, are more than the policy's threshold of 2",
    );
    // A plan of 2 (under the threshold at submission) is held when its jobs are made.
    const planId = await submit(
      { alterations: setAmount(2), filter: { workflowInstanceIds: ids.slice(4, 6) } },
      asKey(t.key),
    );
    expect((await view(planId, t.key)).plan.approval).toBeNull();
    const held = await untilPlan(planId, (pl) => pl.status === 8, 'to be held', 30_000, t.key);
    expect(held.approval.heldBecause).toContain('with the 2 the tenant changed without approval in the last hour');
    expect(await amounts(ids.slice(0, 2))).toEqual([1, 1]);
    expect(await amounts(ids.slice(2))).toEqual([0, 0, 0, 0]);
    // Approved changes do not count: once approved, the plan runs, and the budget is as it was.
    expect((await approve(planId, asKey(t.approver))).status).toBe(202);
    await untilPlan(planId, (pl) => pl.status === 4, 'to complete', 30_000, t.key);
    const { rows } = await h.pool.query<{ n: number }>(
      'SELECT coalesce(sum(instances), 0)::int AS n FROM unapproved_changes WHERE tenant_id = $1',
      [t.tenantId],
    );
    expect(rows[0]!.n).toBe(2);
  });

  it('runs exactly the set approved: instances that came to match after submission are not added', async () => {
    const t = await aboveTwo();
    const first = await t.more(3);
    const planId = await submit(
      { alterations: setAmount(9), filter: { definitionIds: [t.definitionId] }, approval: { required: true } },
      asKey(t.key),
    );
    await untilPlan(planId, (pl) => pl.jobCounts.total === 3, 'to have its jobs', 30_000, t.key);
    const later = await t.more(4);
    const waiting = (await view(planId, t.key)).plan;
    expect(waiting.approval.matchedCount).toBe(3);
    expect(waiting.jobCounts.total).toBe(3);
    expect((await approve(planId, asKey(t.approver))).status).toBe(202);
    const done = await untilPlan(planId, (pl) => pl.status === 4, 'to complete', 30_000, t.key);
    expect(done.jobCounts).toMatchObject({ total: 3, completed: 3 });
    expect(await amounts(first.ids)).toEqual([9, 9, 9]);
    expect(await amounts(later.ids)).toEqual([0, 0, 0, 0]);
  });
});

describe('alterations run at once', () => {
  it('are held as a plan would be: 409 under always and above the threshold, naming the way; retries run', async () => {
    // In id order, the order `amounts` answers in.
    const ids = (await seed(3)).ids.sort();
    const runNow = (workflowInstanceIds: string[], value: number) =>
      h.request('POST', '/alterations/run', { body: { alterations: setAmount(value), workflowInstanceIds } });
    const policy = (body: Record<string, unknown>) => h.request('PUT', '/alterations/policy', { body });
    try {
      expect((await policy({ approval: 'always', approvalThreshold: null, approvalTtlSeconds: 3600 })).status).toBe(
        200,
      );
      const held = await runNow(ids.slice(0, 1), 7);
      expect(held.status, JSON.stringify(held.body)).toBe(409);
      expect(held.body.detail).toContain("The tenant's approval policy (always) holds this change");
      expect(held.body.detail).toContain('POST /alterations/submit');
      expect(await amounts(ids)).toEqual([0, 0, 0]);
      // A retry runs again what faulted: not held (an incident cannot wait for a second principal).
      const retried = await h.request('POST', '/alterations/workflows/retry', { body: { workflowInstanceIds: ids } });
      expect(retried.status, JSON.stringify(retried.body)).toBe(200);
      // One naming activities schedules them, faulted or not: held as a run, by POST and by GET.
      const named = await h.request('POST', '/alterations/workflows/retry', {
        body: { workflowInstanceIds: ids, activityIds: ['set'] },
      });
      expect(named.status, JSON.stringify(named.body)).toBe(409);
      const query = `workflowInstanceIds=${ids[0]}&activityIds=set`;
      expect((await h.request('GET', `/alterations/workflows/retry?${query}`)).status).toBe(409);

      expect((await policy({ approval: 'above', approvalThreshold: 2, approvalTtlSeconds: 3600 })).status).toBe(200);
      await freshBudget();
      const under = await runNow([ids[0]!, ids[1]!, ids[1]!], 8);
      expect(under.status, JSON.stringify(under.body)).toBe(200);
      const over = await runNow(ids, 9);
      expect(over.status, JSON.stringify(over.body)).toBe(409);
      expect(over.body.detail).toContain('(above 2 instances)');
      expect(await amounts(ids)).toEqual([8, 8, 0]);
    } finally {
      await policy(NEVER);
    }
    expect((await runNow(ids, 10)).status).toBe(200);
    expect(await amounts(ids)).toEqual([10, 10, 10]);
  });
});

describe('a revert under the policy', () => {
  it('is held for approval like the plan it reverts, with its reverter as who asked; approved, it restores', async () => {
    const { ids, filter } = await seed(2);
    const done = await submit({ alterations: setAmount(3), filter });
    await untilPlan(done, (pl) => pl.status === 4, 'to complete');
    expect(await amounts(ids)).toEqual([3, 3]);
    expect(
      (
        await h.request('PUT', '/alterations/policy', {
          body: { approval: 'above', approvalThreshold: 1, approvalTtlSeconds: 3600 },
        })
      ).status,
    ).toBe(200);
    await freshBudget();
    try {
      const r = await h.request('POST', `/alterations/${done}/revert`, { body: {} });
      expect(r.status, JSON.stringify(r.body)).toBe(202);
      const revertId = r.body.planId as string;
      await workflowStatus(revertId, 'AwaitingApproval');
      const { plan } = await view(revertId);
      expect(plan.status).toBe(8);
      expect(plan.approval).toMatchObject({ state: 'Pending', matchedCount: 2, requestedBy: { kind: 'apiKey' } });
      expect(await amounts(ids)).toEqual([3, 3]);
      // The approver reads what it would restore: each instance's amount back from 3 to 0.
      const review = await h.request('GET', `/alterations/${revertId}/preview`);
      expect(review.status, JSON.stringify(review.body)).toBe(200);
      expect(review.body.matchedCount).toBe(2);
      expect(review.body.items.map((i: { workflowInstanceId: string }) => i.workflowInstanceId).sort()).toEqual(
        [...ids].sort(),
      );
      for (const item of review.body.items) {
        expect(item.isSuccessful).toBe(true);
        expect(item.changes).toContainEqual(
          expect.objectContaining({ path: '/variables/amount', before: 3, after: 0 }),
        );
      }
      // One instance changed since (a run of one id: under the threshold): the review says its job would fail.
      const [changed, kept] = [...ids].sort();
      const ran = await h.request('POST', '/alterations/run', {
        body: { alterations: setAmount(5), workflowInstanceIds: [changed] },
      });
      expect(ran.status, JSON.stringify(ran.body)).toBe(200);
      const again = (await h.request('GET', `/alterations/${revertId}/preview`)).body;
      const byId = new Map(again.items.map((i: { workflowInstanceId: string }) => [i.workflowInstanceId, i]));
      expect(byId.get(changed)).toMatchObject({
        isSuccessful: false,
        changes: [],
        log: [{ message: `Instance changed since plan ${done}; not reverted` }],
      });
      expect(byId.get(kept)).toMatchObject({ isSuccessful: true });
      // Four eyes: not by the principal that asked for it; by a second one, and then it restores what it said.
      expect((await approve(revertId, {})).status).toBe(403);
      expect((await approve(revertId, asKey(p.approver))).status).toBe(202);
      await untilPlan(revertId, (pl) => pl.status === 4, 'to complete');
      expect(await amounts([changed!, kept!])).toEqual([5, 0]);
    } finally {
      await h.request('PUT', '/alterations/policy', { body: NEVER });
    }
  });
});

describe('a revert rejected or withdrawn while held', () => {
  it("does not count as its plan's revert: the plan can be reverted again, and its page names the revert that counts", async () => {
    const { ids, filter } = await seed(2);
    const done = await submit({ alterations: setAmount(4), filter });
    await untilPlan(done, (pl) => pl.status === 4, 'to complete');
    expect(
      (
        await h.request('PUT', '/alterations/policy', {
          body: { approval: 'always', approvalThreshold: null, approvalTtlSeconds: 3600 },
        })
      ).status,
    ).toBe(200);
    const revert = async (body: object = {}) => h.request('POST', `/alterations/${done}/revert`, { body });
    const { rows } = await h.pool.query('SELECT tenant_id FROM alteration_plans WHERE id = $1', [done]);
    const revertedBy = () => revertingPlanId(h.pool, rows[0].tenant_id, done);
    try {
      const first = await revert();
      expect(first.status, JSON.stringify(first.body)).toBe(202);
      const r1 = first.body.planId as string;
      await workflowStatus(r1, 'AwaitingApproval');
      expect(await revertedBy()).toBe(r1);
      expect((await reject(r1, asKey(p.approver), { comment: 'not this one' })).status).toBe(202);
      expect((await view(r1)).plan.approval.state).toBe('Rejected');
      expect(await revertedBy()).toBeNull();
      // The same id again is still that revert; another revert is a new plan, held in turn.
      const same = await revert({ id: r1 });
      expect([same.status, same.body.planId]).toEqual([202, r1]);
      const second = await revert();
      expect(second.status, JSON.stringify(second.body)).toBe(202);
      const r2 = second.body.planId as string;
      expect(r2).not.toBe(r1);
      await workflowStatus(r2, 'AwaitingApproval');
      expect(await revertedBy()).toBe(r2);
      // While it is held it is the plan's one revert.
      const third = await revert();
      expect(third.status).toBe(409);
      expect(third.body.detail).toBe(`Plan ${done} was already reverted by plan ${r2}`);
      // Withdrawn by who asked for it, it no longer counts either; a third revert, approved, restores.
      expect((await h.request('POST', `/alterations/${r2}/cancel`)).status).toBe(202);
      expect((await view(r2)).plan.approval.state).toBe('Withdrawn');
      const last = await revert();
      expect(last.status, JSON.stringify(last.body)).toBe(202);
      const r3 = last.body.planId as string;
      await workflowStatus(r3, 'AwaitingApproval');
      expect((await approve(r3, asKey(p.approver))).status).toBe(202);
      await untilPlan(r3, (pl) => pl.status === 4, 'to complete');
      expect(await amounts(ids)).toEqual([0, 0]);
      expect(await revertedBy()).toBe(r3);
      expect((await revert()).status).toBe(409);
    } finally {
      await h.request('PUT', '/alterations/policy', { body: NEVER });
    }
  });
});

describe('Migrate with activity mappings', () => {
  const migId = `mig-${run}`;
  /** v1 waits at "review"; v2 renamed it "review2" (same type and name) and dropped "gone". */
  const v1 = flowchart(
    migId,
    [
      writeLine('start', 'started'),
      { ...event('review', 'go'), name: 'Review' },
      writeLine('done', 'v1 done'),
      { ...writeLine('gone', 'old note'), name: 'Old note' },
    ],
    [connect('start', 'review'), connect('review', 'done')],
  );
  const v2 = flowchart(
    migId,
    [
      writeLine('start', 'started'),
      { ...event('review2', 'go'), name: 'Review' },
      writeLine('done', 'v2 done'),
      { ...writeLine('fresh', 'new note'), name: 'New note' },
    ],
    [connect('start', 'review2'), connect('review2', 'done')],
  );
  const mapping = { type: 'Migrate', targetVersion: 2, activityMappings: [{ source: 'review', target: 'review2' }] };
  let instances: string[];

  const instance = async (id: string) => (await h.request('GET', `/workflow-instances/${id}`)).body;
  interface ActivityRecord {
    activityId: string;
    status: string;
    nodeId: string;
    activityType: string;
    inputs: unknown;
    completedAt: string | null;
  }
  const record = (i: { activityRecords: ActivityRecord[] }, activityId: string) =>
    i.activityRecords.filter((r) => r.activityId === activityId);

  beforeAll(async () => {
    expect((await h.request('POST', '/workflow-definitions', { body: v1 })).status).toBe(201);
    instances = [];
    for (let n = 0; n < 3; n++) {
      const r = await h.request('POST', '/workflow-instances', { body: { definitionId: migId, version: 1 } });
      expect(r.status).toBe(202);
      instances.push(r.body.workflowInstanceId);
    }
    for (const id of instances)
      await eventually(async () => ((await instance(id)).subStatus === 'Suspended' ? true : undefined), `${id} waits`);
    expect((await h.request('POST', '/workflow-definitions', { body: v2 })).status).toBe(201);
  }, 60_000);

  it('drafts the mappings: same id, then the one activity with the same type and name, the rest unmapped', async () => {
    const draft = await h.request('GET', `/workflow-definitions/${migId}/migration-draft?from=1&to=2`);
    expect(draft.status).toBe(200);
    expect(draft.body).toEqual({
      definitionId: migId,
      from: 1,
      to: 2,
      mappings: [
        { source: 'start', target: 'start', reason: 'sameId' },
        { source: 'review', target: 'review2', reason: 'sameTypeAndName' },
        { source: 'done', target: 'done', reason: 'sameId' },
      ],
      unmapped: [{ activityId: 'gone', type: 'Elsa.WriteLine', name: 'Old note' }],
    });
    const back = await h.request('GET', `/workflow-definitions/${migId}/migration-draft?from=2&to=1`);
    expect(back.body.mappings).toContainEqual({ source: 'review2', target: 'review', reason: 'sameTypeAndName' });
    expect(back.body.unmapped).toEqual([{ activityId: 'fresh', type: 'Elsa.WriteLine', name: 'New note' }]);

    for (const query of ['from=1&to=3', 'from=9&to=1'])
      expect((await h.request('GET', `/workflow-definitions/${migId}/migration-draft?${query}`)).status, query).toBe(
        404,
      );
    expect((await h.request('GET', `/workflow-definitions/nothing-${run}/migration-draft?from=1&to=2`)).status).toBe(
      404,
    );
    expect((await h.request('GET', `/workflow-definitions/${migId}/migration-draft?from=1`)).status).toBe(400);
    // Another tenant's definition is not found.
    expect(
      (await h.request('GET', `/workflow-definitions/${migId}/migration-draft?from=1&to=2`, { key: expiryKey })).status,
    ).toBe(404);
    const denied = await h.request('GET', `/workflow-definitions/${migId}/migration-draft?from=1&to=2`, {
      key: p.executor,
    });
    expect(denied.status).toBe(403);
    expect(denied.body.detail).toContain('workflows/definitions:view');
  });

  it('refuses a source mapped twice with a 400 naming it', async () => {
    const r = await h.request('POST', '/alterations/submit', {
      body: {
        alterations: [
          {
            type: 'Migrate',
            targetVersion: 2,
            activityMappings: [
              { source: 'review', target: 'review2' },
              { source: 'review', target: 'done' },
            ],
          },
        ],
        filter: { workflowInstanceIds: instances },
      },
    });
    expect(r.status).toBe(400);
    expect(r.body.errors.map((e: { path: string }) => e.path)).toContain('/alterations/0/activityMappings/1/source');
  });

  it('without a mapping fails with the section 4 message and leaves the instance as it was', async () => {
    const id = instances[2]!;
    const before = await instance(id);
    const planId = await submit({
      alterations: [{ type: 'Migrate', targetVersion: 2 }],
      filter: { workflowInstanceIds: [id] },
    });
    const plan = await untilPlan(planId, (pl) => pl.status === 4, 'to complete');
    expect(plan.jobCounts).toMatchObject({ total: 1, failed: 1 });
    const { jobs } = await view(planId);
    expect((jobs[0] as { log: { message: string }[] }).log.map((l) => l.message)).toContain(
      'Activity review does not exist in version 2',
    );
    expect(await instance(id)).toEqual(before);
  });

  it('moves the bookmark and its record; the moved instance goes on in v2, and a revert puts the other back', async () => {
    const [x, y] = instances as [string, string];
    const before = await instance(y);
    expect(before).toMatchObject({ version: 1, bookmarks: [{ activityId: 'review', eventName: 'go' }] });
    const reviewRecord = record(before, 'review');
    expect(reviewRecord).toMatchObject([{ status: 'Running', nodeId: 'flow1:review', activityType: 'Elsa.Event' }]);

    // The preview shows the bookmark moving.
    const preview = await h.request('POST', '/alterations/preview', {
      body: { alterations: [mapping], filter: { workflowInstanceIds: [x, y] } },
    });
    expect(preview.status).toBe(200);
    expect(preview.body.matchedCount).toBe(2);
    for (const item of preview.body.items) {
      expect(item.isSuccessful).toBe(true);
      const bookmarks = item.changes.find((c: { path: string }) => c.path.startsWith('/bookmarks'));
      expect(bookmarks, JSON.stringify(item.changes)).toBeDefined();
      expect(JSON.stringify(bookmarks.before)).toContain('"review"');
      expect(JSON.stringify(bookmarks.after)).toContain('"review2"');
      expect(item.changes.map((c: { path: string }) => c.path)).toContain('/definitionVersion');
    }

    // A mapping to an activity the target version lacks fails as section 4 says.
    const missing = await h.request('POST', '/alterations/preview', {
      body: {
        alterations: [{ ...mapping, activityMappings: [{ source: 'review', target: 'nowhere' }] }],
        filter: { workflowInstanceIds: [y] },
      },
    });
    expect(missing.body.items[0]).toMatchObject({ isSuccessful: false, changes: [] });
    expect(missing.body.items[0].log.map((l: { message: string }) => l.message)).toEqual([
      'Activity nowhere does not exist in version 2',
    ]);

    // Through a plan that awaits approval: its stored preview shows the same.
    const planId = await submit({
      alterations: [mapping],
      filter: { workflowInstanceIds: [x, y] },
      approval: { required: true },
    });
    const stored = await h.request('GET', `/alterations/${planId}/preview`);
    expect(stored.status).toBe(200);
    expect(stored.body.items.map((i: { changes: unknown }) => i.changes)).toEqual(
      preview.body.items.map((i: { changes: unknown }) => i.changes),
    );
    expect((await approve(planId, asKey(p.approver))).status).toBe(202);
    const plan = await untilPlan(planId, (pl) => pl.status === 4, 'to complete');
    expect(plan.jobCounts).toMatchObject({ total: 2, completed: 2, failed: 0 });

    for (const id of [x, y]) {
      const moved = await instance(id);
      expect(moved).toMatchObject({
        version: 2,
        subStatus: 'Suspended',
        bookmarks: [{ activityId: 'review2', eventName: 'go' }],
      });
      const old = record(moved, 'review');
      expect(old).toMatchObject([{ status: 'Canceled' }]);
      expect(old[0]!.completedAt).not.toBeNull();
      expect(record(moved, 'review2')).toMatchObject([
        {
          status: 'Running',
          nodeId: 'flow1:review2',
          activityType: 'Elsa.Event',
          inputs: reviewRecord[0]!.inputs,
          completedAt: null,
        },
      ]);
      // The journal keeps the old ids.
      expect(moved.journal.map((j: { activityId: string }) => j.activityId)).toEqual(['start']);
    }

    // x's event: it goes on in v2.
    const trigger = await h.request('POST', '/events/go/trigger', { body: { workflowInstanceId: x } });
    expect(trigger.body.resumedWorkflowInstanceIds).toEqual([x]);
    const finished = await eventually(async () => {
      const i = await instance(x);
      return i.subStatus === 'Finished' ? i : undefined;
    }, 'x to finish');
    expect(finished.journal.map((j: { message: string }) => j.message)).toEqual(['started', 'v2 done']);
    expect(record(finished, 'review2')).toMatchObject([{ status: 'Completed' }]);

    // The revert: y is back where it waited (v1, bookmark review, its record Running again); x changed since.
    const revert = await h.request('POST', `/alterations/${planId}/revert`, { body: {} });
    expect(revert.status).toBe(202);
    const revertId = revert.body.planId as string;
    const reverted = await untilPlan(revertId, (pl) => pl.status === 4, 'to complete');
    expect(reverted.jobCounts).toMatchObject({ total: 2, completed: 1, failed: 1 });
    const failedJobs = (await h.request('GET', `/alterations/${revertId}/jobs?status=Failed`)).body.items;
    expect(failedJobs.map((j: { workflowInstanceId: string }) => j.workflowInstanceId)).toEqual([x]);
    expect(failedJobs[0].log[0].message).toBe(`Instance changed since plan ${planId}; not reverted`);

    const back = await instance(y);
    expect(back).toMatchObject({
      version: 1,
      definitionVersionId: before.definitionVersionId,
      subStatus: 'Suspended',
      bookmarks: [{ activityId: 'review', eventName: 'go' }],
      variables: before.variables,
      journal: before.journal,
    });
    expect(record(back, 'review')).toMatchObject([{ status: 'Running', completedAt: null }]);
    expect(record(back, 'review2').every((r) => r.status !== 'Running')).toBe(true);

    // y's event: it goes on in v1.
    await h.request('POST', '/events/go/trigger', { body: { workflowInstanceId: y } });
    const yDone = await eventually(async () => {
      const i = await instance(y);
      return i.subStatus === 'Finished' ? i : undefined;
    }, 'y to finish');
    expect(yDone.journal.map((j: { message: string }) => j.message)).toEqual(['started', 'v1 done']);
  }, 60_000);
});

describe('Migrate with activity mappings onto waits of their own', () => {
  const defId = `mig2-${run}`;
  /** v1 waits in "a" (event e-a) and "x" (e-x1) at once; v2 has "x" waiting on e-x2 and "z" on e-z. */
  const v1 = flowchart(
    defId,
    [writeLine('start', 'started'), event('a', 'e-a'), event('x', 'e-x1')],
    [connect('start', 'a'), connect('start', 'x')],
  );
  const v2 = flowchart(
    defId,
    [writeLine('start', 'started'), event('x', 'e-x2'), event('z', 'e-z')],
    [connect('start', 'x'), connect('start', 'z')],
  );
  let ids: string[];
  const instance = async (id: string) => (await h.request('GET', `/workflow-instances/${id}`)).body;
  const trigger = async (eventName: string, id: string) =>
    (await h.request('POST', `/events/${eventName}/trigger`, { body: { workflowInstanceId: id } })).body
      .resumedWorkflowInstanceIds as string[];

  beforeAll(async () => {
    expect((await h.request('POST', '/workflow-definitions', { body: v1 })).status).toBe(201);
    ids = [];
    for (let i = 0; i < 2; i++) {
      const r = await h.request('POST', '/workflow-instances', { body: { definitionId: defId, version: 1 } });
      ids.push(r.body.workflowInstanceId);
    }
    for (const id of ids)
      await eventually(
        async () => ((await instance(id)).bookmarks?.length === 2 ? true : undefined),
        `${id} waits in a and x`,
      );
    expect((await h.request('POST', '/workflow-definitions', { body: v2 })).status).toBe(201);
  }, 60_000);

  it('refuses two sources mapped to one target with a 400 naming both', async () => {
    const r = await h.request('POST', '/alterations/submit', {
      body: {
        alterations: [
          {
            type: 'Migrate',
            targetVersion: 2,
            activityMappings: [
              { source: 'a', target: 'z' },
              { source: 'x', target: 'z' },
            ],
          },
        ],
        filter: { workflowInstanceIds: ids },
      },
    });
    expect(r.status).toBe(400);
    const error = r.body.errors.find((e: { path: string }) => e.path === '/alterations/0/activityMappings/1/target');
    expect(error.message).toBe('Activities a and x are both mapped to z: map each target once');
  });

  it('fails a job whose mapping would carry a wait onto an activity the instance waits in already', async () => {
    const planId = await submit({
      alterations: [{ type: 'Migrate', targetVersion: 2, activityMappings: [{ source: 'a', target: 'x' }] }],
      filter: { workflowInstanceIds: [ids[1]!] },
    });
    await untilPlan(planId, (pl) => pl.status === 4, 'to complete');
    const { jobs } = await view(planId);
    expect((jobs[0] as { status: number; log: { message: string }[] }).status).toBe(3);
    expect((jobs[0] as { log: { message: string }[] }).log.map((l) => l.message)).toContain(
      'Activities a and x would both be carried to x',
    );
    expect((await instance(ids[1]!)).version).toBe(1);
  });

  it("carries each wait onto its target's own event: the source's events resume nothing, the target's do", async () => {
    const id = ids[0]!;
    const planId = await submit({
      alterations: [{ type: 'Migrate', targetVersion: 2, activityMappings: [{ source: 'a', target: 'z' }] }],
      filter: { workflowInstanceIds: [id] },
    });
    const plan = await untilPlan(planId, (pl) => pl.status === 4, 'to complete');
    expect(plan.jobCounts.completed).toBe(1);
    const moved = await instance(id);
    expect(moved.version).toBe(2);
    expect(
      [...moved.bookmarks].sort((l: { activityId: string }, r: { activityId: string }) =>
        l.activityId < r.activityId ? -1 : 1,
      ),
    ).toEqual([
      { activityId: 'x', eventName: 'e-x2' },
      { activityId: 'z', eventName: 'e-z' },
    ]);
    expect(await trigger('e-a', id)).toEqual([]);
    expect(await trigger('e-x1', id)).toEqual([]);
    expect(await trigger('e-z', id)).toEqual([id]);
    expect(await trigger('e-x2', id)).toEqual([id]);
    await eventually(async () => ((await instance(id)).status === 'Finished' ? true : undefined), `${id} finishes`);
    const done = await instance(id);
    // Each activity completed once.
    for (const activityId of ['x', 'z'])
      expect(
        done.activityRecords.filter(
          (r: { activityId: string; status: string }) => r.activityId === activityId && r.status === 'Completed',
        ),
        activityId,
      ).toHaveLength(1);
  });
});

describe('expiry', () => {
  it('cancels an undecided plan at expiresAt with state Expired, on a durable timer across a worker restart', async () => {
    const { plan: waiting } = await view(expiryPlanId, expiryKey);
    expect(waiting.status).toBe(8);
    expect(waiting.approval).toMatchObject({ state: 'Pending', matchedCount: 2, decidedBy: null });
    const expiresAt = Date.parse(waiting.approval.expiresAt);
    expect(expiresAt - Date.parse(waiting.createdAt)).toBe(60_000);
    const listed = await h.request('GET', '/alterations?status=8', { key: expiryKey });
    expect(listed.body.items.map((i: { id: string }) => i.id)).toEqual([expiryPlanId]);
    await workflowStatus(expiryPlanId, 'AwaitingApproval');

    // The worker goes away and another comes, before the expiry: the timer is the server's.
    await h.stopWorker();
    await sleep(Math.max(1_000, Math.min(5_000, expiresAt - Date.now() - 10_000)));
    expect((await view(expiryPlanId, expiryKey)).plan.status).toBe(8);
    await h.startWorker();

    const expired = await untilPlan(
      expiryPlanId,
      (pl) => pl.status !== 8,
      'to expire',
      expiresAt - Date.now() + 20_000,
      expiryKey,
    );
    expect(expired.status).toBe(6);
    expect(expired.approval).toMatchObject({ state: 'Expired', decidedBy: null });
    const completedAt = Date.parse(expired.completedAt);
    expect(completedAt).toBeGreaterThanOrEqual(expiresAt);
    expect(completedAt - expiresAt).toBeLessThan(10_000);
    expect(Date.parse(expired.approval.decidedAt)).toBe(completedAt);
    expect(await jobRows(expiryPlanId)).toEqual({ jobs: 0, sets: 1 });
    expect(await amounts(expiryInstances)).toEqual([0, 0]);

    const handle = h.client.workflow.getHandle(planWorkflowId(expiryPlanId));
    expect(await handle.result()).toMatchObject({ status: 'Cancelled' });
    const history = await handle.fetchHistory();
    expect((history.events ?? []).some((e) => e.timerFiredEventAttributes)).toBe(true);

    const other = await h.keyWith(['alterations:approve'], expiryTenant);
    const late = await approve(expiryPlanId, asKey(other));
    expect(late.status).toBe(409);
  }, 120_000);
});
