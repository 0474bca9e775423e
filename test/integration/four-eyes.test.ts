import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * Four eyes count creators (contract section 10): every key and user records who created it, and a plan's
 * approver may be neither its submitter nor stand on the submitter's creation line (a key or user the
 * submitter made, directly or through keys and users it made; the principal that made the submitter). The
 * operator's bootstrap key is nobody's creature: the keys it makes stand for themselves, so two of them
 * approve each other's plans. A decision after `expiresAt` is a 409, whether or not the expiry timer ran.
 * Real Postgres and Temporal; each case in a tenant of its own whose policy is `always`.
 */
const OPERATOR_KEY = `wfa_operator_${Math.random().toString(36).slice(2)}`;
const CREATURE = 'A plan cannot be approved by a principal that the submitter created';
const CREATOR = 'A plan cannot be approved by the principal that created its submitter';
const SELF = 'A plan cannot be approved by the principal that submitted it';
const SELF_REJECT =
  'A plan cannot be rejected by the principal that submitted it: its submitter withdraws it by cancelling it';
const PASSWORD = 'pass-word-123';
const run = Math.random().toString(36).slice(2, 8);
let h: Harness;
let n = 0;

type As = { key?: string | null; headers?: Record<string, string> };
const asKey = (key: string): As => ({ key });
const bearer = (token: string): As => ({ key: null, headers: { authorization: `Bearer ${token}` } });

beforeAll(async () => {
  h = await createHarness({ config: { adminApiKey: OPERATOR_KEY } });
}, 120_000);
afterAll(() => h?.close());

/** A tenant of its own with a `*` key the operator made, policy `always`, a definition and two instances. */
async function tenant() {
  const tenantId = `four-eyes-${run}-${++n}`;
  const made = await h.request('POST', '/identity/api-keys', {
    key: OPERATOR_KEY,
    body: { name: `tenant admin ${n}`, permissions: ['*'], tenantId },
  });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const admin = { id: made.body.id as string, key: made.body.key as string };
  const policy = await h.request('PUT', '/alterations/policy', {
    ...asKey(admin.key),
    body: { approval: 'always', approvalThreshold: null, approvalTtlSeconds: 3600 },
  });
  expect(policy.status).toBe(200);
  const def = await h.request('POST', '/workflow-definitions', {
    ...asKey(admin.key),
    body: approvalWithNote(`four-eyes-${n}`),
  });
  expect(def.status).toBe(201);
  const ids = await seedInstances(h.pool, {
    definitionVersionId: def.body.id,
    count: 2,
    variables: { amount: 0 },
    tenantId,
    namePrefix: `fe${n}-`,
  });
  return { tenantId, admin, ids };
}

async function makeUser(as: As, permissions: string[]) {
  const name = `fe-user-${run}-${++n}`;
  const made = await h.request('POST', '/identity/users', { ...as, body: { name, password: PASSWORD, permissions } });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const login = await h.request('POST', '/identity/login', { key: null, body: { username: name, password: PASSWORD } });
  expect(login.status).toBe(200);
  return { id: made.body.id as string, name, as: bearer(login.body.accessToken as string) };
}

async function makeKey(as: As, permissions: string[], tenantId?: string) {
  const made = await h.request('POST', '/identity/api-keys', {
    ...as,
    body: { name: `fe-key-${++n}`, permissions, ...(tenantId ? { tenantId } : {}) },
  });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  return { id: made.body.id as string, as: asKey(made.body.key as string) };
}

async function submit(as: As, ids: string[]): Promise<string> {
  const r = await h.request('POST', '/alterations/submit', {
    ...as,
    body: {
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 7 }],
      filter: { workflowInstanceIds: ids },
    },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  const plan = await h.request('GET', `/alterations/${r.body.planId}`, as);
  expect(plan.body.plan.status).toBe(8);
  return r.body.planId as string;
}

const decide = (decision: 'approve' | 'reject', planId: string, as: As) =>
  h.request('POST', `/alterations/${planId}/${decision}`, { ...as, body: {} });

const APPROVER = ['alterations:approve', 'alterations:view'];
const SUBMITTER = ['alterations:execute', 'alterations:view'];

async function completed(planId: string, as: As) {
  return eventually(async () => {
    const r = await h.request('GET', `/alterations/${planId}`, as);
    return r.body.plan.status === 4 ? r.body : undefined;
  }, `plan ${planId} to complete`);
}

describe('four eyes count creators', () => {
  it('refuses a user the submitting key made, and a user made by a key it made; the plan waits untouched', async () => {
    const t = await tenant();
    const planId = await submit(asKey(t.admin.key), t.ids);
    const made = await makeUser(asKey(t.admin.key), APPROVER);
    const byMade = await decide('approve', planId, made.as);
    expect(byMade.status).toBe(403);
    expect(byMade.body.detail).toBe(CREATURE);
    const key = await makeKey(asKey(t.admin.key), ['identity/users:create', ...APPROVER]);
    const grandchild = await makeUser(key.as, APPROVER);
    const byGrandchild = await decide('approve', planId, grandchild.as);
    expect(byGrandchild.status).toBe(403);
    expect(byGrandchild.body.detail).toBe(CREATURE);
    // A key of its own (the key chain) is the submitter itself.
    const byKey = await decide('approve', planId, key.as);
    expect(byKey.status).toBe(403);
    expect(byKey.body.detail).toBe(SELF);
    const plan = await h.request('GET', `/alterations/${planId}`, asKey(t.admin.key));
    expect(plan.body.plan.status).toBe(8);
    expect(plan.body.plan.approval.state).toBe('Pending');
  });

  it('refuses the principal that made the submitting user (one key alone cannot submit as a user it made and approve)', async () => {
    const t = await tenant();
    const user = await makeUser(asKey(t.admin.key), SUBMITTER);
    const planId = await submit(user.as, t.ids);
    const byCreator = await decide('approve', planId, asKey(t.admin.key));
    expect(byCreator.status).toBe(403);
    expect(byCreator.body.detail).toBe(CREATOR);
  });

  it("refuses a user made by the person behind the submitting key: a user's key and the user's creature are one person", async () => {
    const t = await tenant();
    const dave = await makeUser(asKey(t.admin.key), [
      'identity/api-keys:create',
      'identity/users:create',
      ...SUBMITTER,
      ...APPROVER,
    ]);
    const bot = await makeKey(dave.as, SUBMITTER);
    const alt = await makeUser(dave.as, APPROVER);
    const planId = await submit(bot.as, t.ids);
    const byAlt = await decide('approve', planId, alt.as);
    expect(byAlt.status).toBe(403);
    expect(byAlt.body.detail).toBe(CREATURE);
    // And the other way round: a key of the person who made the submitter.
    const altKey = await makeKey(dave.as, APPROVER);
    const altUser = await makeUser(dave.as, SUBMITTER);
    const second = await submit(altUser.as, t.ids);
    const byDavesKey = await decide('approve', second, altKey.as);
    expect(byDavesKey.status).toBe(403);
    expect(byDavesKey.body.detail).toBe(CREATOR);
    expect((await h.request('GET', `/alterations/${planId}`, asKey(t.admin.key))).body.plan.status).toBe(8);
  });

  it('lets two keys the operator made approve each other: its creatures stand for themselves', async () => {
    const t = await tenant();
    const x = await makeKey(asKey(OPERATOR_KEY), SUBMITTER, t.tenantId);
    const y = await makeKey(asKey(OPERATOR_KEY), APPROVER, t.tenantId);
    const planId = await submit(x.as, t.ids);
    const approved = await decide('approve', planId, y.as);
    expect(approved.status, JSON.stringify(approved.body)).toBe(202);
    const done = await completed(planId, x.as);
    expect(done.plan.approval).toMatchObject({ state: 'Approved', decidedBy: { kind: 'apiKey', id: y.id } });
    expect(done.plan.jobCounts.completed).toBe(2);
  });

  it('lets two users one creator made approve each other, and names the creator of each', async () => {
    const t = await tenant();
    const alice = await makeUser(asKey(t.admin.key), SUBMITTER);
    const bob = await makeUser(asKey(t.admin.key), APPROVER);
    const planId = await submit(alice.as, t.ids);
    expect((await decide('approve', planId, bob.as)).status).toBe(202);
    await completed(planId, alice.as);

    const users = await h.request('GET', '/identity/users', asKey(t.admin.key));
    expect(users.status).toBe(200);
    const listed = users.body.items.find((u: { id: string }) => u.id === bob.id);
    expect(listed).toMatchObject({
      name: bob.name,
      createdBy: { kind: 'apiKey', id: t.admin.id, name: expect.any(String) },
    });
    expect(JSON.stringify(users.body)).not.toContain('argon2');
    const keys = await h.request('GET', '/identity/api-keys', asKey(t.admin.key));
    const admin = keys.body.items.find((k: { id: string }) => k.id === t.admin.id);
    expect(admin.createdBy).toEqual({ kind: 'apiKey', id: 'admin-api-key', name: 'ADMIN_API_KEY' });
    // Another tenant's users are the operator's to list, not a tenant's.
    const other = await h.request('GET', '/identity/users?tenantId=someone-else', asKey(t.admin.key));
    expect(other.status).toBe(403);
  });

  it("refuses the submitter's reject with its own words; it withdraws by cancelling", async () => {
    const t = await tenant();
    const planId = await submit(asKey(t.admin.key), t.ids);
    const own = await decide('reject', planId, asKey(t.admin.key));
    expect(own.status).toBe(403);
    expect(own.body.detail).toBe(SELF_REJECT);
    expect((await h.request('POST', `/alterations/${planId}/cancel`, asKey(t.admin.key))).status).toBe(202);
  });

  it('refuses a decision 20 ms after expiresAt with a 409, before the expiry timer has run', async () => {
    const t = await tenant();
    const approver = await makeKey(asKey(OPERATOR_KEY), APPROVER, t.tenantId);
    for (const decision of ['approve', 'reject'] as const) {
      const planId = await submit(asKey(t.admin.key), t.ids);
      // The approval is due 20 ms ago; the workflow's durable timer waits for the hour it was given.
      await h.pool.query(
        `UPDATE alteration_plans SET approval = approval || jsonb_build_object('expiresAt', to_jsonb((now() - interval '20 milliseconds')::text))
          WHERE id = $1`,
        [planId],
      );
      const late = await decide(decision, planId, approver.as);
      expect(late.status, decision).toBe(409);
      expect(late.body.detail).toMatch(/has expired/);
      const plan = await h.request('GET', `/alterations/${planId}`, asKey(t.admin.key));
      expect(plan.body.plan.approval.state).toBe('Pending');
      expect(plan.body.plan.jobCounts.completed).toBe(0);
    }
  });
});

describe('four eyes in the legacy model', () => {
  it('refuses a user with "*" that the submitting key made', async () => {
    const legacy = await createHarness({ worker: false, permissionModel: 'legacy' });
    try {
      const tenantId = `legacy-${run}`;
      const ka = await legacy.keyWith(['*'], tenantId);
      expect(
        (
          await legacy.request('PUT', '/alterations/policy', {
            key: ka,
            body: { approval: 'always', approvalThreshold: null, approvalTtlSeconds: 3600 },
          })
        ).status,
      ).toBe(200);
      const submitted = await legacy.request('POST', '/alterations/submit', {
        key: ka,
        body: {
          alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 1 }],
          filter: { workflowInstanceIds: ['none'] },
        },
      });
      expect(submitted.status).toBe(202);
      const name = `legacy-user-${run}`;
      expect(
        (
          await legacy.request('POST', '/identity/users', {
            key: ka,
            body: { name, password: PASSWORD, permissions: ['*'] },
          })
        ).status,
      ).toBe(201);
      const login = await legacy.request('POST', '/identity/login', {
        key: null,
        body: { username: name, password: PASSWORD },
      });
      const approved = await legacy.request('POST', `/alterations/${submitted.body.planId}/approve`, {
        ...bearer(login.body.accessToken),
        body: {},
      });
      expect(approved.status).toBe(403);
      expect(approved.body.detail).toBe(CREATURE);
    } finally {
      await legacy.close();
    }
  });
});
