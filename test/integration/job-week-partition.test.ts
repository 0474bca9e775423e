import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateJobs } from '../../src/alterations/generation.js';
import { runJobBatch } from '../../src/alterations/processing.js';
import { createHarness, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * Jobs are stored in the week's partition of their generation (migration 036). Retention's sweep makes the coming
 * weeks ahead; a plan generated in a week nobody made (a clock in another week, a service down past the weeks made)
 * makes its own, or its jobs would have nowhere to go.
 */
let h: Harness;
let version: string;

beforeAll(async () => {
  h = await createHarness({ worker: false });
  version = (await h.request('POST', '/workflow-definitions', { body: approvalWithNote('week-partition') })).body.id;
});
afterAll(() => h?.close());

const MONDAY_MS = Date.UTC(2026, 10, 30);
const WEEK_MS = 7 * 24 * 3600 * 1000;

describe("a week's partition", () => {
  it('is made by job generation in a week that has none, and holds the jobs its batches write', async () => {
    // A Wednesday, decades ahead (a week of its own per run): no sweep made it, and none drops a week to come.
    const weeks = 1000 + randomInt(0, 100_000);
    const at = new Date(MONDAY_MS + weeks * WEEK_MS + 2.5 * 24 * 3600 * 1000);
    const monday = new Date(MONDAY_MS + weeks * WEEK_MS).toISOString().slice(0, 10).replaceAll('-', '');
    const name = `alteration_jobs_${monday}`;
    const exists = async () => (await h.pool.query('SELECT to_regclass($1) AS t', [name])).rows[0].t !== null;
    expect(await exists()).toBe(false);

    const ids = await seedInstances(h.pool, { definitionVersionId: version, count: 3, variables: { amount: 1 } });
    const r = await h.request('POST', '/alterations/submit', {
      body: {
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 2 }],
        filter: { workflowInstanceIds: ids },
      },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const planId = r.body.planId as string;
    const deps = { pool: h.workerPool, definitions: h.definitions, clock: () => at };
    expect((await generateJobs(deps, planId)).total).toBe(3);
    expect(await exists()).toBe(true);

    await runJobBatch(deps, { planId, fromOrd: 0, toOrd: 3 });
    const { rows } = await h.pool.query(
      'SELECT tableoid::regclass::text AS part, created_at FROM alteration_jobs WHERE plan_id = $1',
      [planId],
    );
    expect(rows).toHaveLength(3);
    for (const row of rows) expect(row).toEqual({ part: name, created_at: at });
    const { rows: changed } = await h.pool.query(
      "SELECT count(*)::int AS n FROM workflow_instances WHERE id = ANY($1) AND variables->>'amount' = '2'",
      [ids],
    );
    expect(changed[0].n).toBe(3);
  });
});
