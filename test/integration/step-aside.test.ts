import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { PLAN_STATUS } from '../../src/alterations/model.js';
import { STARTING_MS, stepsAside, WAIT_MS } from '../../src/alterations/step-aside.js';
import type { Logger } from '../../src/logger.js';
import { createHarness, type Harness } from '../support/harness.js';
import { batchesOfRun, keepStarting, planToCompletion } from '../support/step-aside.js';

/**
 * A plan's batch steps aside for another tenant's plan that is starting (src/alterations/step-aside.ts): it
 * waits while that plan generates its jobs, then gives its slot back, once per range. The plans here stand in
 * for other tenants' plans as rows (no workflow runs them), so that the plan under test meets them every time.
 */
let h: Harness;
beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 100, window: 2, batchesPerRun: 500 } });
});
afterAll(() => h?.close());

const rows: string[] = [];
/** A plan row of `tenantId` with `status`, started `agoMs` ago (by the database's clock). */
async function planRow(tenantId: string, status: number, agoMs = 0): Promise<string> {
  const id = randomUUID();
  await h.pool.query(
    `INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, created_at, started_at)
     VALUES ($1, $2, '[]', '{}', 'step-aside', $3, now(), now() - $4 * interval '1 millisecond')`,
    [id, tenantId, status, agoMs],
  );
  rows.push(id);
  return id;
}
// Left starting, they would make other tests' batches step aside: ended after each test.
afterEach(async () => {
  await h.pool.query('UPDATE alteration_plans SET status = $2 WHERE id = ANY($1)', [rows, PLAN_STATUS.Cancelled]);
  rows.length = 0;
});

const deps = () => ({ pool: h.pool });

describe("a plan's batch", () => {
  it("steps aside for another tenant's plan that has its jobs and no batch done, not for its own tenant's, nor an old one", async () => {
    // Another tenant's plan that started before this one: this one does not step aside for it.
    await planRow('aside-b', PLAN_STATUS.Dispatching);
    const mine = await planRow('aside-a', PLAN_STATUS.Running);
    const slept: number[] = [];
    const sleep = async (ms: number) => void slept.push(ms);
    // One whose start the database sees in the future (a worker's clock ahead) does not count either.
    await planRow('aside-b', PLAN_STATUS.Dispatching, -60_000);
    await planRow('aside-a', PLAN_STATUS.Dispatching);
    await planRow('aside-a', PLAN_STATUS.Generating);
    await planRow('aside-b', PLAN_STATUS.Dispatching, STARTING_MS + 1000);
    await planRow('aside-b', PLAN_STATUS.Running);
    expect(await stepsAside(deps(), mine, sleep)).toBe(false);
    await planRow('aside-b', PLAN_STATUS.Dispatching);
    expect(await stepsAside(deps(), mine, sleep)).toBe(true);
    expect(slept).toEqual([]);
  });

  it("waits while another tenant's plan generates its jobs, then steps aside", async () => {
    const mine = await planRow('aside-a', PLAN_STATUS.Running);
    const other = await planRow('aside-b', PLAN_STATUS.Generating);
    let slept = 0;
    const sleep = async () => {
      if (++slept === 3)
        await h.pool.query('UPDATE alteration_plans SET status = $2 WHERE id = $1', [other, PLAN_STATUS.Dispatching]);
    };
    expect(await stepsAside(deps(), mine, sleep)).toBe(true);
    expect(slept).toBe(3);
    // A generation that runs into its first batch before this one looks again: nothing to step aside for.
    await h.pool.query('UPDATE alteration_plans SET status = $2 WHERE id = $1', [other, PLAN_STATUS.Running]);
    expect(await stepsAside(deps(), mine, sleep)).toBe(false);
  });

  it('waits at most WAIT_MS for a generation that does not end, then steps aside', async () => {
    const mine = await planRow('aside-a', PLAN_STATUS.Running);
    await planRow('aside-b', PLAN_STATUS.Generating);
    const t0 = performance.now();
    expect(await stepsAside(deps(), mine, (ms) => new Promise((r) => setTimeout(r, ms)))).toBe(true);
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(WAIT_MS - 5);
    expect(waited).toBeLessThan(WAIT_MS + 2000);
  });

  it('does not step aside, and says why in the log, when it cannot look (a batch never fails for it)', async () => {
    const mine = await planRow('aside-a', PLAN_STATUS.Running);
    await planRow('aside-b', PLAN_STATUS.Dispatching);
    // A pool that can no longer query: every look fails.
    const closed = new pg.Pool({ connectionString: h.databaseUrl });
    await closed.end();
    const warned: unknown[][] = [];
    const logger = { warn: (...args: unknown[]) => void warned.push(args) } as unknown as Logger;
    expect(await stepsAside({ pool: closed, logger }, mine, async () => {})).toBe(false);
    expect(warned).toHaveLength(1);
    expect(warned[0]![1]).toBe('plan batch: could not look for starting plans of other tenants');
    // The same rows through a working pool: it would have stepped aside.
    expect(await stepsAside(deps(), mine, async () => {})).toBe(true);
  });
});

describe('a plan whose batches step aside', () => {
  it('runs the range again at once, never a range twice, completes every job, and replays', async () => {
    // Another tenant keeps starting plans while this one runs.
    const other = await keepStarting(h, 'aside-other');
    onTestFinished(other.stop);
    // 20 ranges of 100: those started after the first few meet a start newer than the plan's own.
    const { planId, plan } = await planToCompletion(h, 'aside-plan', 2000);
    expect(plan.jobCounts).toMatchObject({ total: 2000, completed: 2000, failed: 0 });
    const { rows: altered } = await h.pool.query(
      `SELECT count(*)::int AS n FROM workflow_instances WHERE tenant_id = 'aside-plan' AND variables->>'amount' = '5'`,
    );
    expect(altered[0].n).toBe(2000);

    // Its history: a range stepped aside (nothing done), then ran; no range did twice.
    const { batches } = await batchesOfRun(h, planId);
    const ranges = [...new Set(batches.map((b) => b.fromOrd))].sort((x, y) => x - y);
    expect(ranges).toEqual(Array.from({ length: 20 }, (_, i) => i * 100));
    const aside = batches.filter((b) => b.steppedAside).map((b) => b.fromOrd);
    expect(aside.length).toBeGreaterThan(0);
    expect(new Set(aside).size).toBe(aside.length);
    for (const from of ranges) expect(batches.filter((b) => b.fromOrd === from && !b.steppedAside)).toHaveLength(1);
  });
});
