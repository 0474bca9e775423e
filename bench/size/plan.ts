/**
 * A plan as a client runs it: submitted through the API, watched to its end (event stream or polls), then
 * checked in SQL; its before-images and their revert; and the warm-up plan before the measured one.
 */
import type pg from 'pg';
import { seedWithoutWorkflows, round, sleep } from '../util.js';
import { type Api, expectStatus } from './service.js';
import {
  DEFINITION,
  DEFINITION_ID,
  PLAN_ALTERATIONS,
  PLAN_VERIFY,
  PLAN_TIMEOUT_MS,
  PLAN_VALUE,
  POLL_MS,
  RECORD_UNDO,
  SEED_SQL,
  WAIT_VIA,
  WARMUP_DEFINITION_ID,
  WARMUP_N,
} from './settings.js';

/** One small plan over instances of another definition, before the measured one; its time in ms. */
export async function warmUp(api: Api, benchPool: pg.Pool): Promise<number> {
  const def = await api<{ id: string }>('POST', '/workflow-definitions', {
    ...DEFINITION,
    definitionId: WARMUP_DEFINITION_ID,
  });
  expectStatus(def, 201, 'publish warm-up definition');
  await seedWithoutWorkflows(benchPool, SEED_SQL, [def.body.id, WARMUP_N]);
  const plan = await runPlan(api, { definitionIds: [WARMUP_DEFINITION_ID] });
  return plan.planMs;
}

/**
 * The status of the newest plan, which is the bench's own: `GET /alterations?limit=1` (the plan with its
 * job counts, a few rows read), as a client watching a plan reads it. `GET /alterations/{planId}` would
 * also read and serialize its first 1000 jobs each time, work that competes with the plan for the two
 * cores and is no part of processing it.
 */
async function planStatus(api: Api, planId: string): Promise<number> {
  const r = await api<{ items: { id: string; status: number }[] }>('GET', '/alterations?limit=1');
  expectStatus(r, 200, 'list plans');
  const plan = r.body.items[0];
  if (plan?.id !== planId) throw new Error(`the newest plan is ${plan?.id}, not ${planId}`);
  return plan.status;
}

/**
 * Waits for a plan to end as a client watching it would: on its event stream (`GET …/events`: `done` comes
 * as the plan's status changes) or, with BENCH_WAIT=poll, reading its status every POLL_MS. Answers the
 * final status and how many events (or reads) it took.
 */
async function waitForEnd(api: Api, planId: string, t0: number): Promise<{ status: number; reads: number[] }> {
  const reads: number[] = [];
  if (WAIT_VIA === 'events') {
    const res = await api.raw('GET', `/alterations/${planId}/events`);
    if (res.status !== 200 || !res.body) throw new Error(`events: HTTP ${res.status} ${await res.text()}`);
    const reader = res.body.getReader();
    const timeout = setTimeout(() => void reader.cancel(), Math.max(0, PLAN_TIMEOUT_MS - (performance.now() - t0)));
    const decoder = new TextDecoder();
    let buffered = '';
    let last = performance.now();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const event = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (event.startsWith(':')) continue; // a keep-alive comment
        const now = performance.now();
        reads.push(now - last);
        last = now;
        if (event.startsWith('event: done')) {
          clearTimeout(timeout);
          const data = event.split('\n').find((l) => l.startsWith('data: '));
          return { status: (JSON.parse(data!.slice(6)) as { status: number }).status, reads };
        }
      }
    }
    clearTimeout(timeout);
    if (performance.now() - t0 >= PLAN_TIMEOUT_MS) throw new Error(`plan not completed after ${PLAN_TIMEOUT_MS} ms`);
    throw new Error(`the event stream of plan ${planId} ended without done`);
  }
  for (;;) {
    const p0 = performance.now();
    const status = await planStatus(api, planId);
    reads.push(performance.now() - p0);
    if (status >= 4) return { status, reads };
    if (performance.now() - t0 > PLAN_TIMEOUT_MS) throw new Error(`plan not completed after ${PLAN_TIMEOUT_MS} ms`);
    await sleep(POLL_MS);
  }
}

/** Submit -> the plan's end seen by its watcher (`waitForEnd`). */
export async function runPlan(api: Api, filter: unknown) {
  const t0 = performance.now();
  const submit = await api<{ planId: string }>('POST', '/alterations/submit', {
    alterations: PLAN_ALTERATIONS,
    filter,
    ...(PLAN_VERIFY ? { verify: PLAN_VERIFY } : {}),
  });
  const submitMs = performance.now() - t0;
  expectStatus(submit, 202, 'submit');
  const planId = submit.body.planId;
  const { status, reads } = await waitForEnd(api, planId, t0);
  if (status !== 4) throw new Error(`plan ended with status ${status}`);
  return { planId, planMs: performance.now() - t0, submitMs, reads };
}

/** In SQL: every instance holds the plan's value and every job Completed. */
export async function verifyPlan(benchPool: pg.Pool, planId: string, n: number) {
  const { rows: planRows } = await benchPool.query<{
    created: Date;
    started: Date;
    completed: Date;
    job_total: number;
  }>(
    'SELECT created_at AS created, started_at AS started, completed_at AS completed, job_total FROM alteration_plans WHERE id = $1',
    [planId],
  );
  const planRow = planRows[0]!;
  const { rows: altered } = await benchPool.query<{ n: number }>(
    `SELECT count(*) AS n FROM workflow_instances WHERE tenant_id = '' AND definition_id = $1 AND variables->'amount' = $2::jsonb`,
    [DEFINITION_ID, JSON.stringify(PLAN_VALUE)],
  );
  const { rows: jobs } = await benchPool.query<{ n: number }>(
    'SELECT count(*) AS n FROM alteration_jobs WHERE plan_id = $1 AND status = 2',
    [planId],
  );
  const verified = { instancesAltered: altered[0]!.n, jobsCompleted: jobs[0]!.n, jobTotal: planRow.job_total };
  const ok = verified.instancesAltered === n && verified.jobsCompleted === n && verified.jobTotal === n;
  return { planRow, verified: { ...verified, ok } };
}

/**
 * What the before-images cost in storage (bytes per job: the undo column plus the revision) and how fast a
 * revert plan restores them all: POST /alterations/{planId}/revert -> status 4, verified in SQL.
 */
export async function revertPlan(api: Api, benchPool: pg.Pool, planId: string, n: number) {
  const { rows: size } = await benchPool.query<{ undo: number; revision: number; jobs: number }>(
    `SELECT coalesce(sum(pg_column_size(undo)), 0)::float8 AS undo, coalesce(sum(pg_column_size(revision)), 0)::float8 AS revision,
            count(*)::int AS jobs FROM alteration_jobs WHERE plan_id = $1`,
    [planId],
  );
  const bytes = size[0]!;
  const bytesPerJob = round((bytes.undo + bytes.revision) / Math.max(1, bytes.jobs), 1);
  if (!RECORD_UNDO) return { bytesPerJob, revert: null };
  const t0 = performance.now();
  const started = await api<{ planId: string }>('POST', `/alterations/${planId}/revert`, {});
  expectStatus(started, 202, 'revert');
  const { status } = await waitForEnd(api, started.body.planId, t0);
  if (status !== 4) throw new Error(`revert plan ended with status ${status}`);
  const ms = performance.now() - t0;
  const { rows } = await benchPool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM workflow_instances WHERE tenant_id = '' AND definition_id = $1 AND variables->'amount' = '0'::jsonb`,
    [DEFINITION_ID],
  );
  return {
    bytesPerJob,
    revert: {
      ms: round(ms),
      instancesPerSecond: Math.round(n / (ms / 1000)),
      restored: rows[0]!.n,
      ok: rows[0]!.n === n,
    },
  };
}
