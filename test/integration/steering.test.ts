import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * Steering a plan (contract section 7) on real Postgres and Temporal: pause and resume, rate, canary,
 * stop on failures, revert, and a preview that matches what the plan then does.
 */
let h: Harness;
let v1: string;
let seq = 0;

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 1000, window: 4, batchesPerRun: 500 } });
  v1 = (await h.request('POST', '/workflow-definitions', { body: approvalWithNote('steer-def') })).body.id;
  await h.request('POST', '/workflow-definitions', { body: approvalWithNote('steer-def', 'done v2') });
});
afterAll(() => h?.close());

interface PlanView {
  id: string;
  status: number;
  pauseReason: string | null;
  revertOf: string | null;
  rollout: { rate: number | null; canary: number | null; stopOnFailureRatio: number | null } | null;
  startedAt: string | null;
  completedAt: string | null;
  jobCounts: { total: number; pending: number; completed: number; failed: number; cancelled: number };
}

/** Instances of their own, found by a name prefix, so each test's plan matches exactly them. */
async function seed(count: number, variables: Record<string, unknown> = { amount: 1 }) {
  const prefix = `steer${++seq}-`;
  const ids = await seedInstances(h.pool, { definitionVersionId: v1, count, variables, namePrefix: prefix });
  return { ids, filter: { names: null, searchTerm: prefix } };
}

const plan = async (planId: string) => (await h.request('GET', `/alterations/${planId}`)).body.plan as PlanView;
const until = (planId: string, ok: (p: PlanView) => boolean, what: string, timeoutMs = 60_000) =>
  eventually(
    async () => {
      const p = await plan(planId);
      return ok(p) ? p : undefined;
    },
    `plan ${planId} ${what}`,
    timeoutMs,
  );
const finished = (p: PlanView) => p.status === 4 || p.status === 5 || p.status === 6;

async function submit(body: Record<string, unknown>): Promise<string> {
  const r = await h.request('POST', '/alterations/submit', { body });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.planId;
}

/** Jobs finished so far, straight from the job rows. */
async function jobsDone(planId: string): Promise<number> {
  const { rows } = await h.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM alteration_jobs WHERE plan_id = $1 AND status IN (2, 3)',
    [planId],
  );
  return rows[0]!.n;
}

/** A preview path (contract section 7's pointers) read from the instance as GET /workflow-instances/{id} shows it. */
function valueAt(instance: Record<string, any>, path: string): unknown {
  if (path.startsWith('/variables/'))
    return instance.variables.find((v: { id: string }) => v.id === path.slice('/variables/'.length))?.value;
  const field = { '/definitionVersion': 'version', '/scheduledActivities': 'scheduledActivityIds' }[path];
  return instance[field ?? path.slice(1)];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('preview', () => {
  it.each([
    ['ModifyVariable', [{ type: 'ModifyVariable', variableId: 'amount', value: 42 }]],
    ['Migrate', [{ type: 'Migrate', targetVersion: 2 }]],
    ['ScheduleActivity', [{ type: 'ScheduleActivity', activityId: 'note' }]],
    ['CancelActivity', [{ type: 'CancelActivity', activityId: 'wait' }]],
    ['Cancel', [{ type: 'Cancel' }]],
    ['a failing alteration', [{ type: 'ModifyVariable', variableId: 'missing', value: 1 }]],
  ])('of %s matches what the plan then does, and writes nothing', async (_name, alterations) => {
    const { ids, filter } = await seed(5);
    const rows = async () =>
      (
        await h.pool.query(
          'SELECT id, revision, xmin::text AS xmin FROM workflow_instances WHERE id = ANY($1::text[]) ORDER BY id',
          [ids],
        )
      ).rows;
    const before = await rows();
    const preview = await h.request('POST', '/alterations/preview', { body: { alterations, filter, limit: 5 } });
    expect(preview.status).toBe(200);
    expect(preview.body.matchedCount).toBe(5);
    expect(await rows()).toEqual(before); // not one row version changed

    const planId = await submit({ alterations, filter });
    await until(planId, finished, 'finished');
    const { rows: jobs } = await h.pool.query(
      'SELECT instance_id, status, log, undo FROM alteration_jobs WHERE plan_id = $1',
      [planId],
    );
    const jobOf = new Map(jobs.map((j) => [j.instance_id, j]));
    const full = (await h.request('GET', `/alterations/${planId}`)).body;
    const logOf = new Map(
      full.jobs.map((j: { workflowInstanceId: string; log: unknown[] }) => [j.workflowInstanceId, j.log]),
    );
    const strip = (log: { message: string; logLevel: number; eventName: string | null }[]) =>
      log.map(({ message, logLevel, eventName }) => ({ message, logLevel, eventName }));
    for (const item of preview.body.items) {
      const job = jobOf.get(item.workflowInstanceId)!;
      expect(job.status).toBe(item.isSuccessful ? 2 : 3);
      expect(strip(logOf.get(item.workflowInstanceId) as never)).toEqual(strip(item.log));
      // The plan recorded, as what restores the instance, exactly the parts the preview said it would change.
      const recorded = (job.undo ?? []).filter(([path]: [string]) => path !== '/updatedAt');
      expect(recorded.map(([path, value]: [string, unknown]) => ({ path, before: value ?? null }))).toEqual(
        item.changes.map((c: { path: string; before: unknown }) => ({ path: c.path, before: c.before })),
      );
      if (item.isSuccessful && alterations[0]!.type !== 'ScheduleActivity') {
        // And the instance shows the previewed values (a scheduled activity runs at once, so not that one).
        const instance = (await h.request('GET', `/workflow-instances/${item.workflowInstanceId}`)).body;
        for (const change of item.changes as { path: string; after: unknown }[]) {
          if (change.path === '/finishedAt') continue; // the time of the run, not of the preview
          expect(valueAt(instance, change.path) ?? null, change.path).toEqual(change.after);
        }
      }
    }
  });
});

describe('pause and resume', () => {
  it('lets the batches in flight finish, starts none while paused, and resumes to every job once', async () => {
    const { ids, filter } = await seed(3000);
    const planId = await submit({
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 7 }],
      filter,
      rollout: { rate: 1000 },
    });
    await until(planId, (p) => p.jobCounts.completed >= 300, 'past 300 jobs');
    const paused = await h.request('POST', `/alterations/${planId}/pause`);
    expect(paused.status).toBe(202);
    expect(paused.body).toEqual({ planId, status: 7 });
    // The pause answered after the batches in flight committed: nothing finishes from here on.
    const atPause = await jobsDone(planId);
    await sleep(2_000);
    expect(await jobsDone(planId)).toBe(atPause);
    expect(atPause).toBeLessThan(3000);
    const view = await plan(planId);
    expect(view).toMatchObject({ status: 7, pauseReason: 'manual' });
    const progress = await eventually(async () => {
      const p = await h.client.workflow.getHandle(`alteration-plan-${planId}`).query<{ status: string }>('progress');
      return p.status === 'Paused' ? p : undefined;
    }, 'the workflow to say Paused');
    expect(progress.status).toBe('Paused');
    // Pausing again changes nothing; resuming a plan that is not paused is a 409.
    expect((await h.request('POST', `/alterations/${planId}/pause`)).status).toBe(202);

    const resumed = await h.request('POST', `/alterations/${planId}/resume`);
    expect(resumed.status).toBe(202);
    expect(resumed.body).toEqual({ planId, status: 3 });
    expect((await h.request('POST', `/alterations/${planId}/resume`)).status).toBe(409);
    const done = await until(planId, finished, 'finished');
    expect(done).toMatchObject({ status: 4, pauseReason: null });
    expect(done.jobCounts).toMatchObject({ total: 3000, completed: 3000, failed: 0, pending: 0 });
    const { rows } = await h.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND variables->>'amount' = '7'
          AND revision = 1`,
      [ids],
    );
    expect(rows[0]!.n).toBe(3000); // each instance written exactly once
    expect((await h.request('POST', `/alterations/${planId}/pause`)).status).toBe(409);
  }, 90_000);

  it('stays paused while the worker restarts, then resumes; a paused plan can be cancelled', async () => {
    const { filter } = await seed(1000);
    const planId = await submit({
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 8 }],
      filter,
      rollout: { rate: 500 },
    });
    await until(planId, (p) => p.jobCounts.completed >= 100, 'past 100 jobs');
    expect((await h.request('POST', `/alterations/${planId}/pause`)).status).toBe(202);
    const atPause = await jobsDone(planId);
    await h.stopWorker();
    await h.startWorker();
    await sleep(1_500);
    expect(await jobsDone(planId)).toBe(atPause);
    expect((await plan(planId)).status).toBe(7);
    expect((await h.request('POST', `/alterations/${planId}/resume`)).status).toBe(202);
    const done = await until(planId, finished, 'finished');
    expect(done.jobCounts).toMatchObject({ total: 1000, completed: 1000 });

    const second = await seed(2000);
    const other = await submit({
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 9 }],
      filter: second.filter,
      rollout: { rate: 500 },
    });
    await until(other, (p) => p.jobCounts.completed >= 100, 'past 100 jobs');
    expect((await h.request('POST', `/alterations/${other}/pause`)).status).toBe(202);
    expect((await h.request('POST', `/alterations/${other}/cancel`)).status).toBe(202);
    const cancelled = await until(other, finished, 'finished');
    expect(cancelled).toMatchObject({ status: 6, pauseReason: null });
    expect(cancelled.jobCounts.cancelled).toBe(2000 - cancelled.jobCounts.completed);
    const info = await eventually(async () => {
      const d = await h.client.workflow.getHandle(`alteration-plan-${other}`).describe();
      return d.status.name === 'COMPLETED' ? d : undefined;
    }, 'the paused workflow to end after the cancel');
    expect(info.status.name).toBe('COMPLETED');
  }, 90_000);
});

describe('rollout', () => {
  it('holds a rate of 2,000/s over 20,000 instances, and a PATCH to a higher rate speeds it up', async () => {
    const { filter } = await seed(20_000);
    const planId = await submit({
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 3 }],
      filter,
      rollout: { rate: 2000 },
    });
    const done = await until(planId, finished, 'finished', 60_000);
    expect(done.jobCounts.completed).toBe(20_000);
    expect(done.rollout).toEqual({ rate: 2000, canary: null, stopOnFailureRatio: null });
    const { rows } = await h.pool.query<{ first: Date; last: Date }>(
      'SELECT min(started_at) AS first, max(completed_at) AS last FROM alteration_jobs WHERE plan_id = $1',
      [planId],
    );
    const seconds = (rows[0]!.last.getTime() - rows[0]!.first.getTime()) / 1000;
    const took = (Date.parse(done.completedAt!) - Date.parse(done.startedAt!)) / 1000;
    // Never faster than the rate: 20,000 at 2,000/s cannot end in under 10 s.
    expect(took).toBeGreaterThanOrEqual(10);
    const rate = 20_000 / seconds;
    expect(rate).toBeLessThan(2200);

    // The same size at 500/s would take 40 s: raised to 10,000/s after 2 s, it ends far sooner.
    const second = await seed(20_000);
    const slow = await submit({
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 4 }],
      filter: second.filter,
      rollout: { rate: 500 },
    });
    await until(slow, (p) => p.jobCounts.completed > 0, 'started');
    await sleep(2_000);
    const before = await jobsDone(slow);
    expect(before).toBeLessThan(2_000);
    const patched = await h.request('PATCH', `/alterations/${slow}/rollout`, { body: { rate: 10_000 } });
    expect(patched.status).toBe(200);
    expect(patched.body.rollout).toMatchObject({ rate: 10_000 });
    const t0 = Date.now();
    const fast = await until(slow, finished, 'finished', 60_000);
    expect(fast.jobCounts.completed).toBe(20_000);
    // After the PATCH the rest runs clearly faster than 500/s (as fast as the machine allows, up to 10,000/s).
    const afterPatch = (20_000 - before) / ((Date.now() - t0) / 1000);
    expect(afterPatch).toBeGreaterThan(750);
    // And the rate of 2,000/s was held, not just not exceeded: unless the machine itself could not go much
    // faster than that (a loaded machine: the plan at 10,000/s ran below 2,500/s), the first plan ran near it.
    if (afterPatch >= 2_500) expect(rate).toBeGreaterThan(1800);
    expect((await h.request('PATCH', `/alterations/${slow}/rollout`, { body: { rate: 5 } })).status).toBe(409);
    const bad = await h.request('PATCH', `/alterations/${slow}/rollout`, { body: { rate: 0 } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0].path).toBe('/rate');
  }, 120_000);

  it('runs a canary of exactly 100 jobs, then pauses with pauseReason canary until resumed', async () => {
    const { filter } = await seed(1000);
    const planId = await submit({
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 5 }],
      filter,
      rollout: { canary: 100 },
    });
    const paused = await until(planId, (p) => p.status === 7, 'paused');
    expect(paused.pauseReason).toBe('canary');
    await sleep(1_000);
    expect(await jobsDone(planId)).toBe(100);
    expect((await plan(planId)).jobCounts).toMatchObject({ completed: 100, pending: 900 });
    const events = await h.app.request(`/alterations/${planId}/events`, {
      headers: { authorization: `ApiKey ${h.adminKey}` },
    });
    expect(await readFirstEvent(events)).toMatchObject({ status: 7, pauseReason: 'canary' });
    // The Temporal UI finds it by `AlterationPlanStatus = "Paused"`, and its details say why.
    const found = await eventually(async () => {
      for await (const w of h.client.workflow.list({ query: 'AlterationPlanStatus = "Paused"' }))
        if (w.workflowId === `alteration-plan-${planId}`) return w;
      return undefined;
    }, 'the paused plan in a search by AlterationPlanStatus');
    expect(found.workflowId).toBe(`alteration-plan-${planId}`);
    const metadata = await h.client.workflow
      .getHandle(`alteration-plan-${planId}`)
      .query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toMatch(/^\*\*Paused\*\* \(canary\) · 100 jobs done of 1,000/);
    expect((await h.request('POST', `/alterations/${planId}/resume`)).status).toBe(202);
    const done = await until(planId, finished, 'finished');
    expect(done.jobCounts).toMatchObject({ completed: 1000 });
  }, 60_000);

  it('pauses with pauseReason failures when failed ÷ finished exceeds stopOnFailureRatio', async () => {
    const { filter } = await seed(2000);
    const planId = await submit({
      alterations: [{ type: 'ModifyVariable', variableId: 'missing', value: 1 }],
      filter,
      rollout: { stopOnFailureRatio: 0.1, rate: 1000 },
    });
    const paused = await until(planId, (p) => p.status === 7, 'paused');
    expect(paused.pauseReason).toBe('failures');
    const done = await jobsDone(planId);
    expect(done).toBeGreaterThanOrEqual(100);
    expect(done).toBeLessThan(2000);
    expect((await h.request('POST', `/alterations/${planId}/cancel`)).status).toBe(202);
  }, 60_000);
});

/** The data of the first SSE event of a streamed response. */
async function readFirstEvent(response: Response): Promise<unknown> {
  const reader = response.body!.getReader();
  let text = '';
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  await reader.cancel();
  const data = text.split('\n').find((l) => l.startsWith('data:'));
  return JSON.parse(data!.slice(5));
}

describe('revert', () => {
  it('restores every untouched instance exactly, reports a changed one, and a revert of the revert re-applies', async () => {
    const { ids, filter } = await seed(300, { amount: 1 });
    const snapshot = async () =>
      Promise.all(ids.map(async (id) => (await h.request('GET', `/workflow-instances/${id}`)).body));
    const before = await snapshot();
    const planId = await submit({
      alterations: [
        { type: 'ModifyVariable', variableId: 'note', value: 'changed' },
        { type: 'Migrate', targetVersion: 2 },
      ],
      filter,
      rollout: { rate: 300 },
    });
    await until(planId, (p) => p.status === 3 || p.status === 2, 'running');
    const early = await h.request('POST', `/alterations/${planId}/revert`, { body: {} });
    expect(early.status).toBe(409);
    expect(early.body.detail).toMatch(/only a Completed, Failed or Cancelled plan can be reverted/);
    await until(planId, finished, 'finished');
    const after = await snapshot();

    // Someone changes one instance after the plan: the revert must leave it alone.
    const touched = ids[7]!;
    const run = await h.request('POST', '/alterations/run', {
      body: {
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 99 }],
        workflowInstanceIds: [touched],
      },
    });
    expect(run.body.results[0].isSuccessful).toBe(true);

    const revert = await h.request('POST', `/alterations/${planId}/revert`, { body: {} });
    expect(revert.status).toBe(202);
    const revertId = revert.body.planId as string;
    const second = await h.request('POST', `/alterations/${planId}/revert`, { body: {} });
    expect(second.status).toBe(409);
    expect(second.body.detail).toContain(revertId);
    const reverted = await until(revertId, finished, 'finished');
    expect(reverted).toMatchObject({ status: 4, revertOf: planId });
    expect(reverted.jobCounts).toMatchObject({ total: 300, completed: 299, failed: 1 });

    const now = await snapshot();
    for (let i = 0; i < ids.length; i++) {
      if (ids[i] === touched) continue;
      expect(now[i], ids[i]).toEqual(before[i]);
    }
    const changed = now[ids.indexOf(touched)];
    expect(valueAt(changed, '/variables/amount')).toBe(99);
    expect(changed.version).toBe(2);
    const failedJobs = (await h.request('GET', `/alterations/${revertId}/jobs?status=Failed`)).body.items;
    expect(failedJobs).toHaveLength(1);
    expect(failedJobs[0].workflowInstanceId).toBe(touched);
    expect(failedJobs[0].log[0].message).toBe(`Instance changed since plan ${planId}; not reverted`);

    // Reverting the revert puts the plan's changes back on the instances it restored.
    const again = await h.request('POST', `/alterations/${revertId}/revert`, { body: { id: `${revertId}-again` } });
    expect(again.status).toBe(202);
    expect(again.body.planId).toBe(`${revertId}-again`);
    const idempotent = await h.request('POST', `/alterations/${revertId}/revert`, {
      body: { id: `${revertId}-again` },
    });
    expect(idempotent.status).toBe(202);
    await until(`${revertId}-again`, finished, 'finished');
    const reapplied = await snapshot();
    for (let i = 0; i < ids.length; i++) {
      if (ids[i] === touched) continue;
      expect(reapplied[i], ids[i]).toEqual(after[i]);
    }
  }, 90_000);

  it('is a 404 for another tenant, and needs alterations:execute', async () => {
    const { filter } = await seed(3);
    const planId = await submit({ alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 2 }], filter });
    await until(planId, finished, 'finished');
    const viewer = await h.keyWith(['alterations:view']);
    const other = await h.keyWith(['alterations:execute', 'alterations:view'], 'tenant-b');
    for (const [method, path, body] of [
      ['POST', `/alterations/${planId}/revert`, {}],
      ['POST', `/alterations/${planId}/pause`, undefined],
      ['POST', `/alterations/${planId}/resume`, undefined],
      ['PATCH', `/alterations/${planId}/rollout`, { rate: 5 }],
    ] as const) {
      expect((await h.request(method, path, { key: viewer, body })).status, `${method} ${path}`).toBe(403);
      expect((await h.request(method, path, { key: other, body })).status, `${method} ${path}`).toBe(404);
    }
  });
});
