import type { WorkflowHandle } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { generateJobs } from '../../src/alterations/generation.js';
import { type ProcessingDeps, runJobBatch } from '../../src/alterations/processing.js';
import { planWorkflowId } from '../../src/temporal/names.js';
import { type PlanWorkflowProgress, progressQuery } from '../../workflows/alteration-plan.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * Issue 23: a plan's progress is the same, and true, wherever it is read: the workflow's `progress` query,
 * its result, the Temporal UI's current details and the plan view of the API. Batches of 50, a window of
 * 2 and 4 batches per run, so that every plan below continues as new; a rate makes batches smaller and a
 * canary cuts one short, and neither may make the batch count lie ("batch 12 of 3").
 */
let h: Harness;
let idle: Harness;
let version: string;
let seq = 0;
const run = Math.random().toString(36).slice(2, 8);

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 50, window: 2, batchesPerRun: 4 } });
  idle = await createHarness({ worker: false });
  version = (await h.request('POST', '/workflow-definitions', { body: approvalWithNote('progress-def') })).body.id;
}, 60_000);
afterAll(async () => {
  await h?.close();
  await idle?.close();
});

interface JobCounts {
  total: number;
  pending: number;
  running: number;
  completed: number;
  failed: number;
  cancelled: number;
}
interface PlanView {
  id: string;
  status: number;
  pauseReason: string | null;
  outcome: string | null;
  jobCounts: JobCounts;
}

const setAmount = [{ type: 'ModifyVariable', variableId: 'amount', value: 7 }];
const finished = (p: PlanView) => p.status === 4 || p.status === 5 || p.status === 6;

async function seed(count: number) {
  const prefix = `progress${++seq}-${run}-`;
  await seedInstances(h.pool, { definitionVersionId: version, count, variables: { amount: 1 }, namePrefix: prefix });
  return { searchTerm: prefix };
}

async function submit(body: Record<string, unknown>): Promise<string> {
  const r = await h.request('POST', '/alterations/submit', { body: { id: `progress${++seq}-${run}`, ...body } });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.planId as string;
}

const view = async (planId: string) => (await h.request('GET', `/alterations/${planId}`)).body.plan as PlanView;
const handleOf = (planId: string) => h.client.workflow.getHandle(planWorkflowId(planId));
const detailsOf = async (handle: WorkflowHandle) =>
  (await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata')).currentDetails ?? '';

/** The current details line: `**Status** (why) · N jobs done of T (P%) · F failed[ · C cancelled] · batch D of B`. */
const DETAILS =
  /^\*\*(\w+)\*\*(?: \(([^)]*)\))? · ([\d,]+) jobs done(?: of ([\d,]+) \(\d+%\))? · ([\d,]+) failed(?: · ([\d,]+) cancelled)? · batch (\d+) of (\d+|\?)$/;
const int = (s: string | undefined) => (s === undefined ? undefined : Number(s.replace(/,/g, '')));

interface Sample {
  progress: PlanWorkflowProgress;
  view: PlanView;
  details: string;
}

/**
 * Reads the plan's progress query, its current details and its plan view, in that order, again and again
 * until the plan is finished, and checks every reading on the way: no count past the total, no batch past
 * the batch count, and the workflow never ahead of the plan view (a batch commits before it reports).
 */
async function follow(planId: string, until: (p: PlanView) => boolean = finished, timeoutMs = 60_000) {
  const handle = handleOf(planId);
  const samples: Sample[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let progress: PlanWorkflowProgress | undefined;
    let details = '';
    try {
      progress = await handle.query(progressQuery);
      details = await detailsOf(handle);
    } catch (err) {
      // Not started yet, or a new run (continue-as-new) that has not had its first workflow task.
      if (!(err instanceof WorkflowNotFoundError) && !/workflow task|not found/i.test(String(err))) throw err;
    }
    const v = await view(planId);
    if (progress) {
      samples.push({ progress, view: v, details });
      checkSample(planId, { progress, view: v, details });
    }
    if (until(v)) break;
    if (Date.now() > deadline) throw new Error(`plan ${planId} did not get there in time`);
    await new Promise((r) => setTimeout(r, 40));
  }
  return samples;
}

function checkSample(planId: string, { progress: p, view: v, details }: Sample) {
  const what = `${planId}: ${JSON.stringify(p)} / ${JSON.stringify(v.jobCounts)} / ${details}`;
  const done = p.completed + p.failed;
  if (p.total !== null) {
    expect(done, what).toBeLessThanOrEqual(p.total);
    expect(p.total, what).toBe(v.jobCounts.total);
  }
  if (p.batches !== null) expect(p.batchesDone, what).toBeLessThanOrEqual(p.batches);
  // Read before the view: the workflow knows no job the plan view does not.
  expect(p.completed, what).toBeLessThanOrEqual(v.jobCounts.completed);
  expect(p.failed, what).toBeLessThanOrEqual(v.jobCounts.failed);
  expect(v.jobCounts.completed + v.jobCounts.failed + v.jobCounts.cancelled, what).toBeLessThanOrEqual(
    v.jobCounts.total,
  );
  if (!details) return;
  const m = DETAILS.exec(details);
  expect(m, what).not.toBeNull();
  const [, , , jobsDone, of, , , batchDone, batches] = m!;
  if (of !== undefined) expect(int(jobsDone), what).toBeLessThanOrEqual(int(of)!);
  if (batches !== '?') expect(Number(batchDone), what).toBeLessThanOrEqual(Number(batches));
}

/** The plan's histories, one per run, oldest first (the first run's id ends the chain of continue-as-new). */
async function histories(planId: string) {
  const out = [];
  let runId: string | undefined;
  for (;;) {
    const history = await h.client.workflow.getHandle(planWorkflowId(planId), runId).fetchHistory();
    out.unshift(history);
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId ?? undefined;
    if (!runId) return out;
  }
}

/**
 * The finished plan read everywhere: the workflow's result, its progress query, its current details and
 * the plan view say the same, and every batch the plan ran (its runJobBatch activities, over all runs) is
 * counted once.
 */
async function agreeAtTheEnd(planId: string, batches: number) {
  const handle = handleOf(planId);
  const result = await handle.result();
  const progress = await handle.query(progressQuery);
  const details = await detailsOf(handle);
  const v = await view(planId);
  expect(progress).toEqual(result);
  expect({
    total: result.total,
    completed: result.completed,
    failed: result.failed,
    cancelled: result.cancelled,
    pending: result.pending,
  }).toEqual({
    total: v.jobCounts.total,
    completed: v.jobCounts.completed,
    failed: v.jobCounts.failed,
    cancelled: v.jobCounts.cancelled,
    pending: v.jobCounts.pending,
  });
  expect(result.outcome ?? null).toBe(v.outcome);
  expect(result.summary).toBe(details.replace(/\*\*/g, ''));
  const runs = await histories(planId);
  const started = runs
    .flatMap((r) => r.events ?? [])
    .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runJobBatch').length;
  expect(result.batchesDone).toBe(started);
  expect(result.batchesDone).toBe(batches);
  if (v.status === 4) expect(result.batches).toBe(batches);
  // The histories replay on this code (the progress shown is no command).
  for (const history of runs)
    await Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history);
  return { result, details, view: v, runs: runs.length };
}

describe('progress that tells the truth', () => {
  it('of a plain plan that continues as new', async () => {
    const planId = await submit({ alterations: setAmount, filter: await seed(400) });
    const samples = await follow(planId);
    // 400 jobs in batches of 50: 8 batches, 4 per run.
    for (const s of samples) if (s.progress.batches !== null) expect(s.progress.batches).toBe(8);
    const end = await agreeAtTheEnd(planId, 8);
    expect(end.runs).toBeGreaterThan(1);
    expect(end.details).toBe('**Completed** · 400 jobs done of 400 (100%) · 0 failed · batch 8 of 8');
    expect(end.result).toMatchObject({ status: 'Completed', outcome: 'allSucceeded', pending: 0, cancelled: 0 });
    expect(end.view.outcome).toBe('allSucceeded');
  }, 60_000);

  it('of a throttled plan, whose rate makes its batches smaller than the configured size', async () => {
    // 40 a second: batches of 10 (a quarter second of the rate), 12 of them, where 50 a batch would make 3.
    const planId = await submit({ alterations: setAmount, filter: await seed(120), rollout: { rate: 40 } });
    const samples = await follow(planId);
    expect(samples.length).toBeGreaterThan(5);
    for (const s of samples) if (s.progress.batches !== null) expect(s.progress.batches).toBe(12);
    const end = await agreeAtTheEnd(planId, 12);
    expect(end.runs).toBe(3);
    expect(end.details).toBe('**Completed** · 120 jobs done of 120 (100%) · 0 failed · batch 12 of 12');
  }, 60_000);

  it('of a canary, cut at its ordinal, paused, then resumed', async () => {
    const planId = await submit({ alterations: setAmount, filter: await seed(200), rollout: { canary: 30 } });
    await follow(planId, (p) => p.status === 7);
    // The canary's batch of 30, then 170 jobs in batches of 50: 1 + 4 batches.
    const paused = await eventually(async () => {
      const p = await handleOf(planId).query(progressQuery);
      return p.status === 'Paused' ? p : undefined;
    }, 'the workflow to say Paused');
    expect(paused).toMatchObject({ completed: 30, failed: 0, pending: 170, batchesDone: 1, batches: 5 });
    expect(paused.pauseReason).toBe('canary');
    expect(await detailsOf(handleOf(planId))).toBe(
      '**Paused** (canary) · 30 jobs done of 200 (15%) · 0 failed · batch 1 of 5',
    );
    expect((await view(planId)).jobCounts).toMatchObject({ total: 200, completed: 30, pending: 170 });
    expect((await h.request('POST', `/alterations/${planId}/resume`)).status).toBe(202);
    const samples = await follow(planId);
    for (const s of samples) if (s.progress.batches !== null) expect(s.progress.batches).toBe(5);
    const end = await agreeAtTheEnd(planId, 5);
    expect(end.details).toBe('**Completed** · 200 jobs done of 200 (100%) · 0 failed · batch 5 of 5');
  }, 60_000);

  it('of a throttled canary that continues as new while paused and after', async () => {
    // 20 a second: batches of 5; a canary of 12 runs as 5 + 5 + 2, then 48 more jobs in batches of 5.
    const planId = await submit({
      alterations: setAmount,
      filter: await seed(60),
      rollout: { rate: 20, canary: 12 },
    });
    await follow(planId, (p) => p.status === 7);
    const paused = await eventually(async () => {
      const p = await handleOf(planId).query(progressQuery);
      return p.status === 'Paused' ? p : undefined;
    }, 'the workflow to say Paused');
    expect(paused).toMatchObject({ completed: 12, batchesDone: 3, batches: 13 });
    expect((await h.request('POST', `/alterations/${planId}/resume`)).status).toBe(202);
    await follow(planId);
    const end = await agreeAtTheEnd(planId, 13);
    expect(end.runs).toBeGreaterThan(2);
  }, 60_000);

  it('of a revert, and of a plan cancelled mid-way', async () => {
    const original = await submit({ alterations: setAmount, filter: await seed(300) });
    await follow(original);
    const r = await h.request('POST', `/alterations/${original}/revert`, { body: { id: `${original}-revert` } });
    expect(r.status).toBe(202);
    const revert = r.body.planId as string;
    const samples = await follow(revert);
    for (const s of samples) if (s.progress.batches !== null) expect(s.progress.batches).toBe(6);
    const end = await agreeAtTheEnd(revert, 6);
    expect(end.view).toMatchObject({ status: 4, outcome: 'allSucceeded' });
    expect(end.details).toBe('**Completed** · 300 jobs done of 300 (100%) · 0 failed · batch 6 of 6');

    // Cancelled after a few batches: the rest is counted cancelled alike in the workflow and the view.
    const cancelled = await submit({ alterations: setAmount, filter: await seed(200), rollout: { rate: 20 } });
    await follow(cancelled, (p) => p.jobCounts.completed >= 20);
    expect((await h.request('POST', `/alterations/${cancelled}/cancel`)).status).toBe(202);
    await follow(cancelled);
    const handle = handleOf(cancelled);
    const result = await handle.result();
    const v = await view(cancelled);
    expect(v.status).toBe(6);
    expect(v.outcome).toBeNull();
    expect(result).toMatchObject({
      status: 'Cancelled',
      outcome: null,
      total: 200,
      completed: v.jobCounts.completed,
      failed: 0,
      cancelled: v.jobCounts.cancelled,
      pending: 0,
    });
    expect(result.completed + result.cancelled!).toBe(200);
    expect(result.batchesDone).toBe(result.completed / 5);
    expect(result.batches).toBe(40);
    expect(await detailsOf(handle)).toBe(
      `**Cancelled** · ${result.completed} jobs done of 200 (${Math.floor(result.completed / 2)}%) · 0 failed · ${result.cancelled} cancelled · batch ${result.batchesDone} of 40`,
    );
  }, 90_000);
});

describe('a Completed plan whose jobs all failed', () => {
  it('says so in the plan view, the plan list, the workflow result and the Temporal UI', async () => {
    const planId = await submit({
      alterations: [{ type: 'ModifyVariable', variableId: 'missing', value: 1 }],
      filter: await seed(20),
    });
    await follow(planId);
    const end = await agreeAtTheEnd(planId, 1);
    expect(end.view).toMatchObject({
      status: 4,
      outcome: 'allFailed',
      jobCounts: { total: 20, completed: 0, failed: 20, pending: 0 },
    });
    expect(end.result).toMatchObject({ status: 'Completed', outcome: 'allFailed', failed: 20 });
    expect(end.result.summary).toContain('all 20 jobs failed');
    expect(end.details).toBe(
      '**Completed** (all 20 jobs failed) · 20 jobs done of 20 (100%) · 20 failed · batch 1 of 1',
    );
    const list = await h.request('GET', '/alterations?status=Completed&limit=100');
    expect(list.body.items.find((p: PlanView) => p.id === planId)).toMatchObject({ outcome: 'allFailed' });

    // Some failed (a finished instance cannot be altered): someFailed. No job at all: noJobs, never allFailed.
    const some = await seed(3);
    await h.pool.query(
      `UPDATE workflow_instances SET status = 'Finished', sub_status = 'Finished', finished_at = now()
        WHERE id = (SELECT id FROM workflow_instances WHERE name LIKE $1 ORDER BY created_at LIMIT 1)`,
      [`${some.searchTerm}%`],
    );
    const partly = await submit({ alterations: setAmount, filter: some });
    await follow(partly);
    expect((await view(partly)).outcome).toBe('someFailed');
    expect(await handleOf(partly).result()).toMatchObject({ outcome: 'someFailed', failed: 1, completed: 2 });
    const none = await submit({ alterations: setAmount, filter: { searchTerm: `nothing-${run}` } });
    await follow(none);
    const empty = await agreeAtTheEnd(none, 0);
    expect(empty.view).toMatchObject({ status: 4, outcome: 'noJobs', jobCounts: { total: 0 } });
    expect(empty.details).toBe('**Completed** · 0 jobs done of 0 (100%) · 0 failed · batch 0 of 0');
  }, 60_000);
});

describe('a batch run again over a range an earlier run committed', () => {
  // A batch commits, fails afterwards, and its retry reads Paused: it reports nothing done, and the range
  // is run again after the resume. That run finds every job written: it counts them (the workflow counted
  // none of them) and runs nothing twice (the scheduled step ran with the batch that scheduled it).
  it('reports the range’s counts and runs no step twice', async () => {
    const deps = (): ProcessingDeps => ({ pool: idle.workerPool, definitions: idle.definitions });
    const v = (await idle.request('POST', '/workflow-definitions', { body: approvalWithNote('progress-idle') })).body
      .id;
    const ids = await seedInstances(idle.pool, {
      definitionVersionId: v,
      count: 30,
      variables: { amount: 1 },
      namePrefix: `again-${run}-`,
    });
    const submitted = await idle.request('POST', '/alterations/submit', {
      body: { alterations: [{ type: 'ScheduleActivity', activityId: 'note' }], filter: { workflowInstanceIds: ids } },
    });
    const planId = submitted.body.planId as string;
    expect((await generateJobs(deps(), planId)).total).toBe(30);
    const first = await runJobBatch(deps(), { planId, fromOrd: 0, toOrd: 30 });
    // The scheduled WriteLine ran in the batch's transaction: nothing is left for the instances' workflows.
    expect(first).toMatchObject({ processed: 30, batch: { completed: 30, failed: 0 }, dispatched: 0 });
    const again = await runJobBatch(deps(), { planId, fromOrd: 0, toOrd: 30 });
    expect(again).toMatchObject({ processed: 0, batch: { completed: 30, failed: 0 }, paused: false });
    const { rows } = await idle.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM journal_entries WHERE instance_id = ANY($1) AND activity_id = 'note'`,
      [ids],
    );
    expect(rows[0]!.n).toBe(30);
  });
});
