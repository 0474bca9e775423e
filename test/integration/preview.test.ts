import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

let h: Harness;
let ids: string[];
const filter = { definitionIds: ['preview-def'] };

/** Everything a plan could change, to compare before and after a preview. */
const snapshot = async () =>
  (
    await h.pool.query(
      `SELECT (SELECT json_agg(w ORDER BY id) FROM workflow_instances w) AS instances,
              (SELECT count(*)::int FROM alteration_plans) AS plans, (SELECT count(*)::int FROM alteration_jobs) AS jobs`,
    )
  ).rows[0];

beforeAll(async () => {
  h = await createHarness({ worker: false });
  const v1 = await h.request('POST', '/workflow-definitions', { body: approvalWithNote('preview-def') });
  await h.request('POST', '/workflow-definitions', { body: approvalWithNote('preview-def', 'done v2') });
  ids = await seedInstances(h.pool, { definitionVersionId: v1.body.id, count: 30, variables: { amount: 1 } });
  // Another tenant's instances never count.
  await seedInstances(h.pool, { definitionVersionId: v1.body.id, count: 5, tenantId: 'other' });
});
afterAll(() => h?.close());

describe('POST /alterations/preview', () => {
  it('shows what each of the first instances would become, in dry-run order, and writes nothing', async () => {
    const before = await snapshot();
    const r = await h.request('POST', '/alterations/preview', {
      body: {
        alterations: [
          { type: 'ModifyVariable', variableId: 'amount', value: 7 },
          { type: 'Migrate', targetVersion: 2 },
        ],
        filter,
        limit: 3,
      },
    });
    expect(r.status).toBe(200);
    expect(r.body.matchedCount).toBe(30);
    const dryRun = await h.request('POST', '/alterations/dry-run', { body: filter });
    expect(r.body.items.map((i: { workflowInstanceId: string }) => i.workflowInstanceId)).toEqual(
      dryRun.body.workflowInstanceIds.slice(0, 3),
    );
    expect(r.body.items[0]).toMatchObject({
      isSuccessful: true,
      changes: expect.arrayContaining([
        { path: '/definitionVersion', before: 1, after: 2 },
        { path: '/variables/amount', before: 1, after: 7 },
      ]),
    });
    expect(r.body.items[0].log.map((l: { message: string }) => l.message)).toEqual([
      'ModifyVariable succeeded',
      'Migrate succeeded',
    ]);
    expect(await snapshot()).toEqual(before);
  });

  it('shows a cancel, and an alteration that would fail with its log and no changes', async () => {
    const cancel = await h.request('POST', '/alterations/preview', {
      body: { alterations: [{ type: 'Cancel' }], filter, limit: 1 },
    });
    expect(cancel.body.items[0].changes).toEqual(
      expect.arrayContaining([
        { path: '/status', before: 'Running', after: 'Finished' },
        { path: '/subStatus', before: 'Suspended', after: 'Cancelled' },
        { path: '/bookmarks', before: [{ activityId: 'wait', eventName: 'approve' }], after: [] },
      ]),
    );
    const failing = await h.request('POST', '/alterations/preview', {
      body: {
        alterations: [{ type: 'ScheduleActivity', activityId: 'nope' }],
        filter: { workflowInstanceIds: [ids[0]] },
      },
    });
    expect(failing.body).toMatchObject({
      matchedCount: 1,
      items: [{ workflowInstanceId: ids[0], isSuccessful: false, changes: [] }],
    });
    expect(failing.body.items[0].log[0].message).toMatch(/nope/);
  });

  it('takes 1 to 100 instances (10 by default) and needs alterations:execute', async () => {
    const body = { alterations: [{ type: 'Cancel' }], filter };
    expect((await h.request('POST', '/alterations/preview', { body })).body.items).toHaveLength(10);
    for (const limit of [0, 101]) {
      const r = await h.request('POST', '/alterations/preview', { body: { ...body, limit } });
      expect(r.status).toBe(400);
      expect(r.body.errors[0].path).toBe('/limit');
    }
    expect(
      (await h.request('POST', '/alterations/preview', { body, key: await h.keyWith(['alterations:view']) })).status,
    ).toBe(403);
  });
});

describe('POST /alterations/dry-run?countOnly=true', () => {
  it("answers the count of the tenant's matching instances without the ids", async () => {
    const r = await h.request('POST', '/alterations/dry-run?countOnly=true', { body: filter });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ count: 30 });
    expect((await h.request('POST', '/alterations/dry-run?countOnly=maybe', { body: filter })).status).toBe(400);
  });
});
