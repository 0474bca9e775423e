import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateJobs } from '../../src/alterations/generation.js';
import { type BatchResult, type ProcessingDeps, runJobBatch } from '../../src/alterations/processing.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances, withoutWorkflows } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * Jobs are written once, with their result (src/db/migrations/008_job_sets.sql): until a batch runs a
 * job, it is read from the plan's frozen set. What a user sees must not tell the difference: the same
 * job ids before and after, Pending and Cancelled jobs listed and counted, every job run exactly once.
 */
let h: Harness;
let idle: Harness;
let version: string;
let idleVersion: string;
let seq = 0;

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 1000, window: 4, batchesPerRun: 500 } });
  // No worker: its plans are generated and run here, step by step, by calling the activities' code.
  idle = await createHarness({ worker: false });
  version = (await h.request('POST', '/workflow-definitions', { body: approvalWithNote('sets-def') })).body.id;
  idleVersion = (await idle.request('POST', '/workflow-definitions', { body: approvalWithNote('sets-idle') })).body.id;
});
afterAll(async () => {
  await h?.close();
  await idle?.close();
});

interface Job {
  id: string;
  workflowInstanceId: string;
  status: number;
  completedAt: string | null;
}

async function allJobs(harness: Harness, planId: string, status?: string): Promise<Job[]> {
  const jobs: Job[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `limit=1000${status ? `&status=${status}` : ''}${cursor ? `&after=${cursor}` : ''}`;
    const r: { status: number; body: any } = await harness.request('GET', `/alterations/${planId}/jobs?${query}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    jobs.push(...r.body.items);
    cursor = r.body.nextCursor;
  } while (cursor);
  return jobs;
}

async function seed(harness: Harness, definitionVersionId: string, count: number) {
  const prefix = `sets${++seq}-`;
  const ids = await seedInstances(harness.pool, {
    definitionVersionId,
    count,
    variables: { amount: 1 },
    namePrefix: prefix,
  });
  return { ids, filter: { searchTerm: prefix } };
}

const setAmount = [{ type: 'ModifyVariable', variableId: 'amount', value: 7 }];

const planOf = async (harness: Harness, planId: string) =>
  (await harness.request('GET', `/alterations/${planId}`)).body;

/** Until a statement starting with `prefix` waits on a row lock (another connection holds it). */
const waitsOnLock = (prefix: string) =>
  eventually(async () => {
    const { rows } = await idle.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
      [`${prefix}%`],
    );
    return rows[0]!.n > 0 ? true : undefined;
  }, 'the batch waits on the changed row');
describe('jobs read from the frozen set', () => {
  it('keep their ids from Pending to Completed, and list and count as Pending until they run', async () => {
    const { ids, filter } = await seed(h, version, 2500);
    const submitted = await h.request('POST', '/alterations/submit', {
      body: { alterations: setAmount, filter, rollout: { canary: 1200 } },
    });
    expect(submitted.status).toBe(202);
    const planId = submitted.body.planId as string;
    await eventually(async () => ((await planOf(h, planId)).plan.status === 7 ? true : undefined), 'canary pause');

    const paused = await allJobs(h, planId);
    expect(paused.map((j) => j.workflowInstanceId)).toEqual(ids);
    expect(new Set(paused.map((j) => j.id)).size).toBe(2500);
    expect(paused.slice(0, 1200).every((j) => j.status === 2)).toBe(true);
    expect(paused.slice(1200).every((j) => j.status === 0 && j.completedAt === null)).toBe(true);
    expect((await allJobs(h, planId, 'Pending')).map((j) => j.id)).toEqual(paused.slice(1200).map((j) => j.id));
    expect((await allJobs(h, planId, 'Completed')).map((j) => j.id)).toEqual(paused.slice(0, 1200).map((j) => j.id));
    expect(await allJobs(h, planId, 'Running')).toHaveLength(0);
    expect(await allJobs(h, planId, 'Cancelled')).toHaveLength(0);
    const view = await planOf(h, planId);
    expect(view.plan.jobCounts).toMatchObject({ total: 2500, pending: 1300, completed: 1200 });
    expect(view.jobs.map((j: Job) => j.id)).toEqual(paused.slice(0, 1000).map((j) => j.id));
    // Reading twice gives the same ids (a pending job's id is not drawn at random on each read).
    expect((await allJobs(h, planId)).map((j) => j.id)).toEqual(paused.map((j) => j.id));

    expect((await h.request('POST', `/alterations/${planId}/resume`)).status).toBe(202);
    await eventually(async () => ((await planOf(h, planId)).plan.status === 4 ? true : undefined), 'completion');
    const done = await allJobs(h, planId);
    expect(done.map((j) => j.id)).toEqual(paused.map((j) => j.id));
    expect(done.every((j) => j.status === 2)).toBe(true);
    const { rows } = await h.pool.query<{ n: number; altered: number }>(
      `SELECT (SELECT count(*)::int FROM alteration_jobs WHERE plan_id = $1) AS n,
              (SELECT count(*)::int FROM workflow_instances WHERE id = ANY($2::text[]) AND variables->>'amount' = '7' AND revision = 1) AS altered`,
      [planId, ids],
    );
    expect(rows[0]).toEqual({ n: 2500, altered: 2500 });
  });

  it('read as Cancelled, at the moment of the cancel, once their plan is cancelled', async () => {
    const { filter } = await seed(h, version, 1500);
    const submitted = await h.request('POST', '/alterations/submit', {
      body: { alterations: setAmount, filter, rollout: { canary: 400 } },
    });
    const planId = submitted.body.planId as string;
    await eventually(async () => ((await planOf(h, planId)).plan.status === 7 ? true : undefined), 'canary pause');
    expect((await h.request('POST', `/alterations/${planId}/cancel`)).status).toBe(202);
    const { plan } = await planOf(h, planId);
    expect(plan.status).toBe(6);
    expect(plan.jobCounts).toMatchObject({ total: 1500, pending: 0, completed: 400, cancelled: 1100 });
    const cancelled = await allJobs(h, planId, 'Cancelled');
    expect(cancelled).toHaveLength(1100);
    expect(cancelled.every((j) => j.status === 4 && j.completedAt === plan.completedAt)).toBe(true);
    expect(await allJobs(h, planId, 'Pending')).toHaveLength(0);
    const { rows } = await h.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM alteration_jobs WHERE plan_id = $1',
      [planId],
    );
    expect(rows[0]!.n).toBe(400);
  });
});

describe('a batch', () => {
  const deps = (): ProcessingDeps => ({ pool: idle.workerPool, definitions: idle.definitions });
  // The batch in node (a plan of other alterations than ModifyVariable runs there); the set-based batch of a
  // ModifyVariable plan meets the same writers in test/integration/set-based-batches.test.ts.
  const inNode = (): ProcessingDeps => ({ ...deps(), setBased: false });

  async function generatedPlan(count: number) {
    const { ids, filter } = await seed(idle, idleVersion, count);
    const submitted = await idle.request('POST', '/alterations/submit', { body: { alterations: setAmount, filter } });
    expect(submitted.status).toBe(202);
    const planId = submitted.body.planId as string;
    expect((await generateJobs(deps(), planId)).total).toBe(count);
    return { planId, ids };
  }

  it('run twice at once (a retry while the first attempt still runs) writes each job and instance once', async () => {
    const { planId, ids } = await generatedPlan(600);
    const attempts = await Promise.allSettled([
      runJobBatch(deps(), { planId, fromOrd: 0, toOrd: 600 }),
      runJobBatch(deps(), { planId, fromOrd: 0, toOrd: 600, redispatch: true }),
    ]);
    // The one that lost rolled back on the jobs' primary key and ran again, finding nothing left to do.
    expect(attempts.map((a) => a.status)).toEqual(['fulfilled', 'fulfilled']);
    const results = attempts.map((a) => (a as PromiseFulfilledResult<BatchResult>).value);
    expect(results.map((r) => r.processed).sort()).toEqual([0, 600]);
    expect(results.map((r) => r.batch)).toEqual([
      { completed: 600, failed: 0, skipped: 0 },
      { completed: 600, failed: 0, skipped: 0 },
    ]);
    const again = await runJobBatch(deps(), { planId, fromOrd: 0, toOrd: 600, redispatch: true });
    expect(again.processed).toBe(0);
    expect(again.batch).toEqual({ completed: 600, failed: 0, skipped: 0 });
    const { rows } = await idle.pool.query<{ jobs: number; once: number }>(
      `SELECT (SELECT count(*)::int FROM alteration_jobs WHERE plan_id = $1 AND status = 2) AS jobs,
              (SELECT count(*)::int FROM workflow_instances WHERE id = ANY($2::text[]) AND revision = 1 AND variables->>'amount' = '7') AS once`,
      [planId, ids],
    );
    expect(rows[0]).toEqual({ jobs: 600, once: 600 });
  });

  it('reads its instances without row locks, and runs again locked when one changed before it wrote: both changes kept', async () => {
    const { planId, ids } = await generatedPlan(50);
    const target = ids[10]!;
    const other = await idle.pool.connect();
    try {
      // Another writer (the instance's own step, say) has changed one instance and not committed yet.
      await other.query('BEGIN');
      await other.query(
        `UPDATE workflow_instances SET revision = revision + 1, variables = variables || '{"note":"by its step"}' WHERE id = $1`,
        [target],
      );
      const batch = runJobBatch(inNode(), { planId, fromOrd: 0, toOrd: 50 });
      // The batch read the row as last committed, altered it, and waits on the row to write it.
      await waitsOnLock('UPDATE workflow_instances w SET revision');
      await other.query('COMMIT');
      const result = await batch;
      expect(result.processed).toBe(50);
      expect(result.batch).toEqual({ completed: 50, failed: 0, skipped: 0 });
    } finally {
      other.release();
    }
    const { rows } = await idle.pool.query<{
      id: string;
      revision: number;
      amount: number;
      note: string | null;
      undo_revision: number;
    }>(
      `SELECT w.id, w.revision, (w.variables->>'amount')::int AS amount, w.variables->>'note' AS note, j.revision AS undo_revision
         FROM workflow_instances w JOIN alteration_jobs j ON j.instance_id = w.id AND j.plan_id = $2
        WHERE w.id = ANY($1::text[]) ORDER BY w.id`,
      [ids, planId],
    );
    const changed = rows.find((r) => r.id === target)!;
    // The step's change was not overwritten by what the batch first read; the job's before-image is of
    // the instance as the step left it (revision 1), and the plan's write made revision 2.
    expect(changed).toMatchObject({ revision: 2, amount: 7, note: 'by its step', undo_revision: 2 });
    const rest = rows.filter((r) => r.id !== target);
    expect(rest.every((r) => r.revision === 1 && r.amount === 7 && r.note === null && r.undo_revision === 1)).toBe(
      true,
    );
  });

  it('does not fail a job on an instance read before another writer changed it: the batch runs again locked', async () => {
    const { planId, ids } = await generatedPlan(20);
    const target = ids[5]!;
    // The instance is Finished when the batch reads it (its job would fail: "is finished")...
    await withoutWorkflows(
      idle.pool,
      `UPDATE workflow_instances SET status = 'Finished', sub_status = 'Finished', revision = revision + 1 WHERE id = $1`,
      [target],
    );
    const other = await idle.pool.connect();
    try {
      // ... and another writer, not yet committed, has made it Running again (a revert of what finished it).
      await other.query('BEGIN');
      await other.query("SET LOCAL wfa.outbox = 'off'");
      await other.query(
        `UPDATE workflow_instances SET status = 'Running', sub_status = 'Suspended', revision = revision + 1 WHERE id = $1`,
        [target],
      );
      const batch = runJobBatch(inNode(), { planId, fromOrd: 0, toOrd: 20 });
      // The batch checks the refused instance's revision and waits on the writer's row lock to do it.
      await waitsOnLock('SELECT id, revision FROM workflow_instances');
      await other.query('COMMIT');
      const result = await batch;
      // Read again locked, the instance is Running: its job succeeds like the others.
      expect(result.batch).toEqual({ completed: 20, failed: 0, skipped: 0 });
    } finally {
      other.release();
    }
    const { rows } = await idle.pool.query<{ status: string; amount: number; revision: number }>(
      `SELECT status, (variables->>'amount')::int AS amount, revision FROM workflow_instances WHERE id = $1`,
      [target],
    );
    expect(rows[0]).toEqual({ status: 'Running', amount: 7, revision: 3 });
  });

  it('replaces the Pending rows of a plan generated before job sets, keeping their ids', async () => {
    const { planId } = await generatedPlan(30);
    // What generation wrote before migration 008: a Pending row per job, with a random id.
    const { rows: legacy } = await idle.pool.query<{ ord: number; id: string }>(
      `INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, created_at)
       SELECT $1, o.ord, wfa_uuid_v7(s.created_at, o.ord), s.instance_ids[o.ord + 1], s.created_at
         FROM alteration_job_sets s, generate_series(0, 9) AS o(ord) WHERE s.plan_id = $1
       RETURNING ord, id`,
      [planId],
    );
    const before = await allJobs(idle, planId);
    expect(before.slice(0, 10).map((j) => j.id)).toEqual(legacy.sort((a, b) => a.ord - b.ord).map((r) => r.id));
    expect(before.every((j) => j.status === 0)).toBe(true);
    const result = await runJobBatch(deps(), { planId, fromOrd: 0, toOrd: 30 });
    expect(result.processed).toBe(30);
    const after = await allJobs(idle, planId);
    expect(after.map((j) => j.id)).toEqual(before.map((j) => j.id));
    expect(after.every((j) => j.status === 2)).toBe(true);
    const { rows } = await idle.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM alteration_jobs WHERE plan_id = $1',
      [planId],
    );
    expect(rows[0]!.n).toBe(30);
  });
});
