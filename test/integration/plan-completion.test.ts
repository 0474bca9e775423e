import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLAN_STATUS } from '../../src/alterations/model.js';
import { completePlan, type ProcessingDeps } from '../../src/alterations/processing.js';
import { createHarness, type Harness } from '../support/harness.js';

// A plan is Completed only when every job has its result: the batches' counts add up to its total. A plan
// whose batches were skipped (a worker that sized them otherwise took it over) fails loudly instead.
let h: Harness;
let deps: ProcessingDeps;
const run = Math.random().toString(36).slice(2, 8);

beforeAll(async () => {
  h = await createHarness({ worker: false });
  deps = { pool: h.pool } as ProcessingDeps;
}, 60_000);

afterAll(() => h?.close());

async function runningPlan(id: string, total: number, counted: [number, number, number][]) {
  await h.pool.query(
    `INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, job_total, created_at, started_at)
     VALUES ($1, '', '[]', '{}', 'h', $2, $3, now(), now())`,
    [id, PLAN_STATUS.Running, total],
  );
  for (const [fromOrd, completed, failed] of counted) {
    await h.pool.query(
      'INSERT INTO alteration_batch_counts (plan_id, from_ord, completed, failed) VALUES ($1, $2, $3, $4)',
      [id, fromOrd, completed, failed],
    );
  }
}

const statusOf = async (id: string) =>
  (await h.pool.query<{ status: number }>('SELECT status FROM alteration_plans WHERE id = $1', [id])).rows[0]!.status;

describe('completing a plan', () => {
  it('refuses while jobs have no result, and leaves the plan as it was', async () => {
    const id = `short-${run}`;
    await runningPlan(id, 10, [[0, 7, 1]]);
    await expect(completePlan(deps, id)).rejects.toThrow('2 of 10 jobs have no result');
    expect(await statusOf(id)).toBe(PLAN_STATUS.Running);
    // The missing batch runs: now it completes, and completing again changes nothing.
    await h.pool.query(
      'INSERT INTO alteration_batch_counts (plan_id, from_ord, completed, failed) VALUES ($1, 8, 2, 0)',
      [id],
    );
    await completePlan(deps, id);
    expect(await statusOf(id)).toBe(PLAN_STATUS.Completed);
    await completePlan(deps, id);
    expect(await statusOf(id)).toBe(PLAN_STATUS.Completed);
  });

  it('completes a plan with no jobs, and leaves a cancelled one cancelled', async () => {
    await runningPlan(`empty-${run}`, 0, []);
    await completePlan(deps, `empty-${run}`);
    expect(await statusOf(`empty-${run}`)).toBe(PLAN_STATUS.Completed);
    await runningPlan(`cancelled-${run}`, 5, [[0, 2, 0]]);
    await h.pool.query('UPDATE alteration_plans SET status = $2 WHERE id = $1', [
      `cancelled-${run}`,
      PLAN_STATUS.Cancelled,
    ]);
    await completePlan(deps, `cancelled-${run}`);
    expect(await statusOf(`cancelled-${run}`)).toBe(PLAN_STATUS.Cancelled);
  });
});
