import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { PLAN_STATUS } from '../../src/alterations/model.js';
import { GaveWay, givingWay, STARTING_MS, stepsAside, WAIT_MS } from '../../src/alterations/step-aside.js';
import { withTransaction } from '../../src/db/pool.js';
import type { Logger } from '../../src/logger.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';
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

/** A row written, then a statement that would run `seconds`, in one transaction watched by `givingWay`. */
async function watchedWork(mine: string, seconds: number, marker: string) {
  const t0 = performance.now();
  const outcome = await withTransaction(h.pool, (client) =>
    givingWay(deps(), mine, client, async () => {
      await client.query(`SELECT set_config('wfa.marker', $1, true)`, [marker]);
      await client.query(
        `INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, created_at)
         VALUES ($1, 'aside-marker', '[]', '{}', 'step-aside', $2, now())`,
        [marker, PLAN_STATUS.Cancelled],
      );
      await client.query('SELECT pg_sleep($1)', [seconds]);
      return 'done' as const;
    }),
  ).catch((err: unknown) => err);
  rows.push(marker);
  const { rows: written } = await h.pool.query('SELECT 1 FROM alteration_plans WHERE id = $1', [marker]);
  return { outcome, ms: performance.now() - t0, written: written.length === 1 };
}

/** Every connection the pool holds answers outside a transaction (none was handed back inside a failed one). */
async function poolIsClean() {
  const clients = await Promise.all(Array.from({ length: h.pool.totalCount }, () => h.pool.connect()));
  try {
    for (const c of clients) {
      const { rows: r } = await c.query<{ open: boolean }>(`SELECT now() <> statement_timestamp() AS open`);
      expect(r[0]!.open).toBe(false);
    }
  } finally {
    for (const c of clients) c.release();
  }
}

describe("a plan's batch while its work runs", () => {
  it("gives way to another tenant's plan that starts: its statement cancelled, its transaction rolled back", async () => {
    const mine = await planRow('aside-a', PLAN_STATUS.Running);
    // Starts a moment after the work did, while its statement runs (it would take 20 s).
    const starting = new Promise<void>((r) => setTimeout(r, 300)).then(() =>
      planRow('aside-b', PLAN_STATUS.Generating),
    );
    const { outcome, ms, written } = await watchedWork(mine, 20, randomUUID());
    await starting;
    expect(outcome).toBeInstanceOf(GaveWay);
    expect(ms).toBeLessThan(5_000);
    expect(written).toBe(false);
    await poolIsClean();
  });

  it("runs to its end beside its own tenant's starting plan, an earlier one, or when it cannot look", async () => {
    await planRow('aside-b', PLAN_STATUS.Generating);
    const mine = await planRow('aside-a', PLAN_STATUS.Running);
    await planRow('aside-a', PLAN_STATUS.Generating);
    const quiet = await watchedWork(mine, 0.3, randomUUID());
    expect(quiet.outcome).toBe('done');
    expect(quiet.written).toBe(true);
    // A look that fails ends the watch, logged; the work goes on.
    await planRow('aside-b', PLAN_STATUS.Dispatching);
    const closed = new pg.Pool({ connectionString: h.databaseUrl });
    await closed.end();
    const warned: unknown[][] = [];
    const logger = { warn: (...args: unknown[]) => void warned.push(args) } as unknown as Logger;
    const marker = randomUUID();
    const result = await withTransaction(h.pool, (client) =>
      givingWay({ pool: closed, logger }, mine, client, async () => {
        await client.query('SELECT pg_sleep(0.2)');
        return 'done';
      }),
    );
    expect(result).toBe('done');
    expect(warned[0]?.[1]).toBe('plan batch: could not look for starting plans of other tenants');
    // The same watch through a working pool gives way.
    expect((await watchedWork(mine, 20, marker)).outcome).toBeInstanceOf(GaveWay);
    await poolIsClean();
  });
});

describe('a plan whose batches step aside', () => {
  it('gives way with a batch already running when another tenant starts one, runs that range again once, and replays', async () => {
    const tenantId = 'aside-running';
    const key = await h.keyWith(['*'], tenantId);
    const def = await h.request('POST', '/workflow-definitions', { key, body: approvalWithNote(tenantId) });
    await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 400, tenantId });
    // Every instance locked: the plan's first batches wait on their rows, their statements running.
    const holder = await h.pool.connect();
    onTestFinished(() => holder.release());
    await holder.query('BEGIN');
    await holder.query(`SELECT id FROM workflow_instances WHERE tenant_id = $1 FOR UPDATE`, [tenantId]);
    const r = await h.request('POST', '/alterations/submit', {
      key,
      body: {
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 5 }],
        filter: { definitionIds: [tenantId] },
      },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const planId = r.body.planId as string;
    await eventually(async () => {
      const { rows: waiting } = await h.pool.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`,
      );
      return waiting[0].n >= 2 ? true : undefined;
    }, 'two batches waiting on the locked instances');
    // Another tenant's plan starts (after this one did), with its jobs: the batch that may give way does.
    await planRow('aside-other', PLAN_STATUS.Dispatching);
    await eventually(async () => {
      const { batches } = await batchesOfRun(h, planId);
      return batches.filter((b) => b.steppedAside).length >= 2 ? true : undefined;
    }, 'the batches in flight to give way');
    await h.pool.query('UPDATE alteration_plans SET status = $2 WHERE id = ANY($1)', [rows, PLAN_STATUS.Cancelled]);
    await holder.query('ROLLBACK');
    const plan = await eventually(async () => {
      const v = await h.request('GET', `/alterations/${planId}`, { key });
      return v.body.plan.status === PLAN_STATUS.Completed ? v.body.plan : undefined;
    }, 'the plan to complete');
    expect(plan.jobCounts).toMatchObject({ total: 400, completed: 400, failed: 0 });
    const { rows: altered } = await h.pool.query(
      `SELECT count(*)::int AS n FROM workflow_instances WHERE tenant_id = $1 AND variables->>'amount' = '5'`,
      [tenantId],
    );
    expect(altered[0].n).toBe(400);
    const { batches } = await batchesOfRun(h, planId);
    // Both batches in flight (waiting on their rows) gave way, each range at most once, and every range ran once.
    const aside = batches.filter((b) => b.steppedAside).map((b) => b.fromOrd);
    expect(aside.length).toBeGreaterThanOrEqual(2);
    expect(new Set(aside).size).toBe(aside.length);
    for (const from of [0, 100, 200, 300])
      expect(batches.filter((b) => b.fromOrd === from && !b.steppedAside)).toHaveLength(1);
  });

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
