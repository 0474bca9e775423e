import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { chain, event, writeLine } from '../support/workflows.js';

let h: Harness;
let versionId: string;

const definition = (id: string, after: string[] = []) =>
  chain(id, [writeLine('start', 'started'), event('wait', 'approve'), ...after.map((t, i) => writeLine(`after${i}`, t))], {
    variables: [
      { id: 'amount', name: 'Amount', typeName: 'Int32', value: 0 },
      { id: 'note', name: 'Note', typeName: 'String' },
    ],
  });

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

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 50, window: 2, batchesPerRun: 500 } });
  const def = await h.request('POST', '/workflow-definitions', { body: definition('plan-def') });
  expect(def.status).toBe(201);
  versionId = def.body.id;
});
afterAll(() => h?.close());

describe('plans', () => {
  it('alters every matched instance through jobs and completes', async () => {
    const ids = await seedInstances(h.pool, { definitionVersionId: versionId, count: 120, variables: { amount: 1 } });
    const submit = await h.request('POST', '/alterations/submit', {
      body: { alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 42 }], filter: { definitionIds: ['plan-def'] } },
    });
    expect(submit.status).toBe(202);
    const planId = submit.body.planId as string;
    expect(submit.headers.get('location')).toBe(`/alterations/${planId}`);

    const body = await waitForPlan(planId);
    expect(body.plan.jobCounts).toEqual({ total: 120, pending: 0, running: 0, completed: 120, failed: 0, cancelled: 0 });
    expect(body.plan.startedAt).not.toBeNull();
    expect(body.plan.completedAt).not.toBeNull();
    expect(body.jobs.map((j: { workflowInstanceId: string }) => j.workflowInstanceId)).toEqual(ids);
    expect(body.jobs[0].log).toEqual([
      { message: 'ModifyVariable succeeded', logLevel: 2, timestamp: expect.any(String), eventName: 'Alteration ModifyVariable succeeded' },
    ]);
    const { rows } = await h.pool.query(`SELECT count(*)::int AS n FROM workflow_instances WHERE variables->>'amount' = '42'`);
    expect(rows[0].n).toBe(120);
  });
});
