import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { constants as perfConstants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import pg from 'pg';
import { createApiKey } from '../src/auth/api-keys.js';
import { tuneHeapGrowth } from '../src/memory.js';
import { loadConfig } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { createPool } from '../src/db/pool.js';
import { serveApi } from '../src/api/server.js';
import { createLogger } from '../src/logger.js';
import { createService } from '../src/service/index.js';
import { cpuBetween, cpuSnapshot } from './cpu.js';
import { planHistory } from './history.js';
import { activityRecords, instrumentPool, sqlStats, sqlTable, timingInterceptor } from './instrument.js';
import type { SizeResult } from './report.js';
import { dbUrl, mb, RANDOM_IDS, round, SEEDED_AT, seededId, seedWithoutWorkflows, sleep, stat } from './util.js';

export const DEFINITION_ID = 'bench-def';
export const PLAN_VALUE = 1001;
/**
 * The measured plan's alterations: a ModifyVariable of `amount` (the default), or with BENCH_PLAN=schedule a
 * ScheduleActivity of the definition's SetVariable `set` (amount = PLAN_VALUE), a pure step each job runs in
 * its batch. Both leave every instance with `amount` = PLAN_VALUE, which is what the raw UPDATE floor writes.
 */
const PLAN_ALTERATIONS =
  process.env.BENCH_PLAN === 'schedule'
    ? [{ type: 'ScheduleActivity', activityId: 'set' }]
    : [{ type: 'ModifyVariable', variableId: 'amount', value: PLAN_VALUE }];
export const RAW_VALUE = 2002;
export const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 50);
/** How the bench learns that a plan ended: its event stream (default), or `poll` (every POLL_MS). */
export const WAIT_VIA: 'events' | 'poll' = process.env.BENCH_WAIT === 'poll' ? 'poll' : 'events';
export const PLAN_TIMEOUT_MS = Number(process.env.BENCH_PLAN_TIMEOUT_MS ?? 30 * 60_000);
/** BENCH_DRY_RUNS: how many dry-runs (and countOnly requests) each way; 5 by default. */
export const DRY_RUNS = Number(process.env.BENCH_DRY_RUNS ?? 5);
if (!Number.isInteger(DRY_RUNS) || DRY_RUNS < 1) throw new Error('BENCH_DRY_RUNS must be a whole number of 1 or more');

// ---------------------------------------------------------------------------------------------------
// One size, in a child process

export const SEED_SQL = `
  INSERT INTO workflow_instances
    (id, tenant_id, definition_id, definition_version_id, version, name, correlation_id, status, sub_status,
     variables, scheduled, bookmarks, created_at, updated_at)
  SELECT ${seededId('n', SEEDED_AT)}, '', d.definition_id, d.id, d.version, 'bench-' || n, 'bench-' || n, 'Running', 'Suspended',
         '{"amount":0}'::jsonb, '[]'::jsonb, '[{"activityId":"wait","eventName":"approve"}]'::jsonb,
         ${SEEDED_AT}, now()
    FROM workflow_definitions d, generate_series(1, $2::int) AS n
   WHERE d.id = $1`;

export const RAW_UPDATE_SQL = `UPDATE workflow_instances SET variables = jsonb_set(variables, '{amount}', to_jsonb($2::int)), updated_at = now()
  WHERE tenant_id = '' AND definition_id = $1`;

export const lit = (value: unknown, typeName = 'String') => ({ typeName, expression: { type: 'Literal', value } });
export const DEFINITION = {
  definitionId: DEFINITION_ID,
  name: 'Bench',
  root: {
    type: 'Elsa.Flowchart',
    id: 'flow1',
    start: 'start',
    activities: [
      { id: 'start', type: 'Elsa.WriteLine', version: 1, text: lit('start') },
      { id: 'wait', type: 'Elsa.Event', version: 1, eventName: lit('approve') },
      // Not connected: what a ScheduleActivity plan runs (BENCH_PLAN=schedule).
      {
        id: 'set',
        type: 'Elsa.SetVariable',
        version: 1,
        variable: lit('amount'),
        value: { typeName: 'Int32', expression: { type: 'Literal', value: PLAN_VALUE } },
      },
    ],
    connections: [{ source: { activity: 'start', port: 'Done' }, target: { activity: 'wait', port: 'In' } }],
  },
  variables: [{ id: 'amount', name: 'Amount', typeName: 'Int32', value: 0 }],
};

export async function walLsn(db: pg.Pool): Promise<string | null> {
  const { rows } = await db
    .query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')
    .catch(() => ({ rows: [] as { lsn: string }[] }));
  return rows[0]?.lsn ?? null;
}

export async function walMbSince(db: pg.Pool, from: string | null): Promise<number | null> {
  if (from === null) return null;
  const { rows } = await db.query<{ bytes: string }>(
    'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text AS bytes',
    [from],
  );
  return mb(Number(rows[0]!.bytes));
}

export async function recreateDatabase(adminUrl: string, database: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(database)} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
  } finally {
    await admin.end();
  }
}

type Api = (<T = any>(method: string, path: string, body?: unknown) => Promise<{ status: number; body: T }>) & {
  /** The raw response, for a body read as a stream. */
  raw(method: string, path: string, body?: unknown): Promise<Response>;
};

function expectStatus(r: { status: number; body: unknown }, status: number, what: string): void {
  if (r.status !== status) throw new Error(`${what}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 500)}`);
}

/** BENCH_RECORD_UNDO=0: plan jobs record no before-image (the bench's way to measure what they cost). */
const RECORD_UNDO = process.env.BENCH_RECORD_UNDO !== '0';

/** The service as production wires it (src/service.ts), in process, on a fresh database; both pools counted. */
async function startBenchService(n: number) {
  const adminUrl = process.env.BENCH_PG_ADMIN_URL!;
  const address = process.env.BENCH_TEMPORAL_ADDRESS!;
  const config = loadConfig();
  const database = `wfa_bench_${n}`;
  await recreateDatabase(adminUrl, database);
  const url = dbUrl(adminUrl, database);
  // The bench's own statements (seed, verify, the raw UPDATE) go through a pool of their own, uncounted.
  const benchPool = createPool(url, 2);
  await migrate(benchPool);
  const service = await createService(
    {
      ...config,
      databaseUrl: url,
      authSigningKey: randomBytes(32).toString('base64url'),
      adminApiKey: `wfa_unused_${randomBytes(8).toString('hex')}`,
      temporal: { ...config.temporal, address, taskQueue: `wfa-bench-${n}-${process.pid}` },
    },
    {
      logger: createLogger('warn'),
      listen: false,
      workflowBundlePath: process.env.BENCH_WORKFLOW_BUNDLE,
      workerOptions: { interceptors: { activity: [timingInterceptor] } },
      onPool: (p) => instrumentPool(p),
      recordUndo: RECORD_UNDO,
    },
  );
  const app = service.app!;
  const admin = await createApiKey(service.pool, { name: 'bench admin', permissions: ['*'], tenantKey: '' });
  const send = (method: string, p: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `ApiKey ${admin.key}` };
    let text: string | undefined;
    if (body !== undefined) {
      text = JSON.stringify(body);
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(text));
    }
    return app.request(p, { method, headers, ...(text !== undefined ? { body: text } : {}) });
  };
  const api = Object.assign(
    async (method: string, p: string, body?: unknown) => {
      const res = await send(method, p, body);
      const raw = await res.text();
      return { status: res.status, body: raw ? JSON.parse(raw) : undefined };
    },
    { raw: send },
  ) as Api;
  const stop = async () => {
    await service.stop();
    await benchPool.end();
  };
  return { config, service, benchPool, api, key: admin.key, stop };
}

/** Definition through the API, N instances in one statement, statistics. */
async function seed(api: Api, benchPool: pg.Pool, n: number): Promise<number> {
  const def = await api<{ id: string }>('POST', '/workflow-definitions', DEFINITION);
  expectStatus(def, 201, 'publish definition');
  const t = performance.now();
  const seeded = await seedWithoutWorkflows(benchPool, SEED_SQL, [def.body.id, n]);
  const seedMs = performance.now() - t;
  if (seeded.rowCount !== n) throw new Error(`seeded ${seeded.rowCount} instances, expected ${n}`);
  // The floor's runs each find their rows written before and vacuumed: room on the pages for a heap-only write
  // (migration 025). The plan finds the same, as in a table of instances that live and change: every row is
  // written once more and vacuumed (since 2026-11-27; BENCH_FRESH_PAGES=1 plans on the freshly inserted pages).
  if (!FRESH_PAGES) {
    await benchPool.query('VACUUM ANALYZE workflow_instances');
    const written = await benchPool.query(
      `UPDATE workflow_instances SET revision = revision WHERE tenant_id = '' AND definition_id = $1`,
      [DEFINITION_ID],
    );
    if (written.rowCount !== n) throw new Error(`wrote ${written.rowCount} instances once more, expected ${n}`);
  }
  await benchPool.query('VACUUM ANALYZE workflow_instances');
  await benchPool.query('CHECKPOINT').catch(() => undefined); // superuser only; just less noise
  return seedMs;
}

const COLD = process.env.BENCH_COLD === '1';
const FRESH_PAGES = process.env.BENCH_FRESH_PAGES === '1';
const WARMUP_DEFINITION_ID = 'bench-warmup';
const WARMUP_N = 10;

/** One small plan over instances of another definition, before the measured one; its time in ms. */
async function warmUp(api: Api, benchPool: pg.Pool): Promise<number> {
  const def = await api<{ id: string }>('POST', '/workflow-definitions', {
    ...DEFINITION,
    definitionId: WARMUP_DEFINITION_ID,
  });
  expectStatus(def, 201, 'publish warm-up definition');
  await seedWithoutWorkflows(benchPool, SEED_SQL, [def.body.id, WARMUP_N]);
  const plan = await runPlan(api, { definitionIds: [WARMUP_DEFINITION_ID] });
  return plan.planMs;
}

/** Memory, CPU and event loop sampled while the plan runs; `stop()` returns what was seen. */
function startSampling() {
  const rssBefore = process.memoryUsage().rss;
  let rssPeak = rssBefore;
  let heapPeak = process.memoryUsage().heapUsed;
  let samples = 0;
  const timeline: { s: number; rssMb: number; heapUsedMb: number }[] = [];
  const from = performance.now();
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    rssPeak = Math.max(rssPeak, m.rss);
    heapPeak = Math.max(heapPeak, m.heapUsed);
    if (samples++ % 20 === 0)
      timeline.push({ s: round((performance.now() - from) / 1000), rssMb: mb(m.rss), heapUsedMb: mb(m.heapUsed) });
  }, 50);
  // heapUsed just after each major GC: the live set, whatever the GC's timing (the peaks above are not).
  const afterMajorGc: number[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if ((e as { detail?: { kind?: number } }).detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) {
        afterMajorGc.push(process.memoryUsage().heapUsed);
      }
    }
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const cpu0 = cpuSnapshot();
  return {
    stop() {
      const cpu = cpuBetween(cpu0, cpuSnapshot());
      loopDelay.disable();
      clearInterval(sampler);
      gcObserver.disconnect();
      const gc = (globalThis as { gc?: () => void }).gc;
      gc?.();
      const afterPlanGc = gc ? process.memoryUsage() : undefined;
      const memory = {
        rssBeforePlanMb: mb(rssBefore),
        rssPeakDuringPlanMb: mb(rssPeak),
        heapUsedPeakDuringPlanMb: mb(heapPeak),
        samples,
        liveHeapAfterMajorGcMb: {
          max: afterMajorGc.length ? mb(Math.max(...afterMajorGc)) : null,
          last: afterMajorGc.length ? mb(afterMajorGc[afterMajorGc.length - 1]!) : null,
          majorGcs: afterMajorGc.length,
        },
        afterPlanFullGc: afterPlanGc ? { heapUsedMb: mb(afterPlanGc.heapUsed), rssMb: mb(afterPlanGc.rss) } : null,
        timeline,
        maxRssAfterPlanMb: mb(process.resourceUsage().maxRSS * 1024),
      };
      const eventLoopDelay = {
        p50Ms: round(loopDelay.percentile(50) / 1e6),
        p99Ms: round(loopDelay.percentile(99) / 1e6),
        maxMs: round(loopDelay.max / 1e6),
      };
      return { cpu, memory, eventLoopDelay };
    },
  };
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
async function runPlan(api: Api, filter: unknown) {
  const t0 = performance.now();
  const submit = await api<{ planId: string }>('POST', '/alterations/submit', {
    alterations: PLAN_ALTERATIONS,
    filter,
  });
  const submitMs = performance.now() - t0;
  expectStatus(submit, 202, 'submit');
  const planId = submit.body.planId;
  const { status, reads } = await waitForEnd(api, planId, t0);
  if (status !== 4) throw new Error(`plan ended with status ${status}`);
  return { planId, planMs: performance.now() - t0, submitMs, reads };
}

/** In SQL: every instance holds the plan's value and every job Completed. */
async function verifyPlan(benchPool: pg.Pool, planId: string, n: number) {
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

function activityBreakdown(): SizeResult['breakdown']['activities'] {
  const activities: SizeResult['breakdown']['activities'] = {};
  for (const type of [...new Set(activityRecords.map((a) => a.type))]) {
    const of = activityRecords.filter((a) => a.type === type);
    activities[type] = {
      ...stat(of.map((a) => a.wallMs)),
      sqlMs: round(of.reduce((s, a) => s + a.sqlMs, 0)),
      queries: of.reduce((s, a) => s + a.queries, 0),
    };
  }
  return activities;
}

/**
 * What the before-images cost in storage (bytes per job: the undo column plus the revision) and how fast a
 * revert plan restores them all: POST /alterations/{planId}/revert -> status 4, verified in SQL.
 */
async function revertPlan(api: Api, benchPool: pg.Pool, planId: string, n: number) {
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

/** The floor: the same change as one UPDATE, on a vacuumed table, after a checkpoint. */
/** Runs of the raw UPDATE (BENCH_RAW_RUNS, default 3): the floor is their median, as the VM's speed drifts. */
const RAW_RUNS = Math.max(1, Number(process.env.BENCH_RAW_RUNS ?? 3));

/** The floor: the same change as one statement, RAW_RUNS times on a vacuumed table; the median run counts. */
async function rawUpdate(benchPool: pg.Pool, n: number) {
  const runs: { ms: number; walMb: number | null; rows: number; verified: number }[] = [];
  for (let i = 0; i < RAW_RUNS; i++) {
    await benchPool.query('VACUUM ANALYZE workflow_instances');
    await benchPool.query('CHECKPOINT').catch(() => undefined);
    const walBefore = await walLsn(benchPool);
    const t = performance.now();
    const res = await benchPool.query(RAW_UPDATE_SQL, [DEFINITION_ID, RAW_VALUE + i]);
    const ms = performance.now() - t;
    const walMb = await walMbSince(benchPool, walBefore);
    const { rows } = await benchPool.query<{ n: number }>(
      `SELECT count(*) AS n FROM workflow_instances WHERE tenant_id = '' AND definition_id = $1 AND variables->'amount' = $2::jsonb`,
      [DEFINITION_ID, JSON.stringify(RAW_VALUE + i)],
    );
    runs.push({ ms, walMb, rows: res.rowCount ?? 0, verified: rows[0]!.n });
  }
  const median = [...runs].sort((x, y) => x.ms - y.ms)[Math.floor((runs.length - 1) / 2)]!;
  return {
    ms: median.ms,
    walMb: median.walMb,
    result: {
      ms: round(median.ms),
      runsMs: runs.map((r) => round(r.ms)),
      rows: median.rows,
      verified: Math.min(...runs.map((r) => r.verified)),
      ok: runs.every((r) => r.rows === n && r.verified === n),
    },
  };
}

/**
 * The dry-run as a client in a process of its own sees it, over HTTP (bench/dry-run-client.ts): the service
 * listens on a free port of 127.0.0.1 for as long as the client runs.
 */
async function dryRunsOverHttp(
  app: { fetch: (r: Request) => Response | Promise<Response> },
  key: string,
  filter: unknown,
) {
  const server = serveApi(app, { port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const root = path.resolve(import.meta.dirname, '..');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(root, 'bench', 'dry-run-client.ts'),
        JSON.stringify({ url, key, filter, runs: DRY_RUNS }),
      ],
      { cwd: root, maxBuffer: 1 << 20 },
    );
    return JSON.parse(stdout) as { runsMs: number[]; counts: number[]; countOnlyMs: number[]; countOnly: number[] };
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

/**
 * Dry-run latency, the median of DRY_RUNS, on a vacuumed table with statistics: read in this process (the
 * service's app called directly, the bench's reading on the service's thread) and, after it, by a client in
 * a process of its own over HTTP, as a user's would be.
 */
async function dryRuns(
  api: Api,
  benchPool: pg.Pool,
  filter: unknown,
  n: number,
  http?: { app: Parameters<typeof dryRunsOverHttp>[0]; key: string },
) {
  await benchPool.query('VACUUM ANALYZE workflow_instances');
  const runsMs: number[] = [];
  let count = -1;
  for (let i = 0; i < DRY_RUNS; i++) {
    const d0 = performance.now();
    // Read as a client that streams would, counting the ids without holding the body, so that the
    // process's memory is the service's (the bench's own client and the service share the process).
    const res = await api.raw('POST', '/alterations/dry-run', filter);
    if (res.status !== 200) throw new Error(`dry-run: HTTP ${res.status} ${await res.text()}`);
    let quotes = 0;
    let tail = '';
    for await (const chunk of res.body!) {
      // The quotes counted where they lie in the bytes (memchr), not char by char in JS: the bench's own
      // reading shares this process's CPU with the service it measures.
      const bytes = Buffer.from(chunk as Uint8Array);
      for (let k = bytes.indexOf(34); k !== -1; k = bytes.indexOf(34, k + 1)) quotes++;
      tail = (tail + bytes.subarray(-4).toString('latin1')).slice(-4);
    }
    runsMs.push(round(performance.now() - d0));
    // {"workflowInstanceIds":["a","b",…]}: two quotes around the key, two around each id.
    count = tail.trimEnd().endsWith(']}') ? (quotes - 2) / 2 : -1;
    if (count !== n) break;
  }
  // countOnly: the count without the ids.
  const countMs: number[] = [];
  for (let i = 0; i < DRY_RUNS; i++) {
    const d0 = performance.now();
    const r = await api<{ count: number }>('POST', '/alterations/dry-run?countOnly=true', filter);
    countMs.push(round(performance.now() - d0));
    expectStatus(r, 200, 'dry-run countOnly');
    if (r.body.count !== n) throw new Error(`countOnly answered ${r.body.count}, not ${n}`);
  }
  const overHttp = http ? await dryRunsOverHttp(http.app, http.key, filter) : undefined;
  const httpOk = !overHttp || (overHttp.counts.every((c) => c === n) && overHttp.countOnly.every((c) => c === n));
  return {
    medianMs: stat(runsMs).medianMs,
    runsMs,
    count,
    ok: count === n && httpOk,
    countOnlyMedianMs: stat(countMs).medianMs,
    ...(overHttp
      ? {
          overHttp: {
            medianMs: stat(overHttp.runsMs).medianMs,
            runsMs: overHttp.runsMs,
            countOnlyMedianMs: stat(overHttp.countOnlyMs).medianMs,
            countOnlyMs: overHttp.countOnlyMs,
            ok: httpOk,
          },
        }
      : {}),
  };
}

export async function runSize(n: number): Promise<SizeResult> {
  const log = (msg: string) => process.stdout.write(`[bench N=${n}] ${msg}\n`);
  const { config, service, benchPool, api, key, stop } = await startBenchService(n);
  try {
    const seedMs = await seed(api, benchPool, n);
    log(`seeded ${n} instances in ${round(seedMs / 1000, 2)} s`);

    const filter = { definitionIds: [DEFINITION_ID] };
    // A worker runs its first plan with cold workflow code (~165 ms to load it into the workflow thread);
    // a service that has been up has run plans before. BENCH_COLD=1 measures the first plan instead.
    if (!COLD) log(`warm-up plan over ${WARMUP_N} other instances in ${round(await warmUp(api, benchPool), 0)} ms`);
    activityRecords.length = 0;
    sqlStats.worker.clear();
    sqlStats.api.clear();
    const walBeforePlan = await walLsn(benchPool);
    const sampling = startSampling();
    const plan = await runPlan(api, filter);
    const sampled = sampling.stop();
    const walPlan = await walMbSince(benchPool, walBeforePlan);
    log(
      `plan ${plan.planId} completed in ${round(plan.planMs / 1000, 2)} s (${Math.round(n / (plan.planMs / 1000))} instances/s)`,
    );
    const { planRow, verified } = await verifyPlan(benchPool, plan.planId, n);
    if (!verified.ok) log(`VERIFICATION FAILED: ${JSON.stringify(verified)}`);
    const temporal = await planHistory(
      service.client,
      plan.planId,
      Math.min(config.alterations.window, config.database.batchSlots),
    );
    const workerSql = sqlTable(sqlStats.worker);
    const apiSql = sqlTable(sqlStats.api);
    // The plan's activities only (the revert plan below runs batches too).
    const activities = activityBreakdown();

    const undo = await revertPlan(api, benchPool, plan.planId, n);
    log(
      `before-images ${RECORD_UNDO ? `${undo.bytesPerJob} bytes/job` : 'off'}` +
        (undo.revert ? `; revert in ${round(undo.revert.ms / 1000, 2)} s (${undo.revert.instancesPerSecond}/s)` : ''),
    );
    const raw = await rawUpdate(benchPool, n);
    log(`raw UPDATE in ${round(raw.ms / 1000, 2)} s (median of ${raw.result.runsMs.length})`);
    const dryRun = await dryRuns(api, benchPool, filter, n, { app: service.app!, key });
    log(
      `dry-run median ${dryRun.medianMs} ms (${dryRun.count} ids); over HTTP from another process ${dryRun.overHttp?.medianMs} ms, countOnly ${dryRun.overHttp?.countOnlyMedianMs} ms`,
    );

    return {
      n,
      recordUndo: RECORD_UNDO,
      freshPages: FRESH_PAGES,
      randomIds: RANDOM_IDS,
      undo,
      seedMs: round(seedMs),
      plan: {
        planId: plan.planId,
        ms: round(plan.planMs),
        submitMs: round(plan.submitMs),
        instancesPerSecond: Math.round(n / (plan.planMs / 1000)),
        serverSide: {
          createdToStartedMs: planRow.started.getTime() - planRow.created.getTime(),
          createdToCompletedMs: planRow.completed.getTime() - planRow.created.getTime(),
        },
        verified,
        watch: { via: WAIT_VIA, ...stat(plan.reads) },
      },
      raw: raw.result,
      ratio: round(plan.planMs / raw.ms, 2),
      dryRun,
      memory: { ...sampled.memory, maxRssAtEndMb: mb(process.resourceUsage().maxRSS * 1024) },
      temporal,
      breakdown: {
        activities,
        workerSql,
        apiSql,
        cpu: sampled.cpu,
        walMb: { plan: walPlan, raw: raw.walMb },
        eventLoopDelay: sampled.eventLoopDelay,
      },
    };
  } finally {
    await stop();
  }
}

/**
 * BENCH_ONLY=dry-run: seed N instances and measure the dry-run alone (streamed ids and countOnly), for the
 * 1,000,000-id figure without the hour a 1M plan, its revert and three raw UPDATEs take.
 */
export async function runDryRunOnly(
  n: number,
): Promise<{ n: number; seedMs: number; dryRun: Awaited<ReturnType<typeof dryRuns>> }> {
  const { service, benchPool, api, key, stop } = await startBenchService(n);
  try {
    const seedMs = await seed(api, benchPool, n);
    const dryRun = await dryRuns(api, benchPool, { definitionIds: [DEFINITION_ID] }, n, { app: service.app!, key });
    process.stdout.write(
      `[bench N=${n}] dry-run median ${dryRun.medianMs} ms of ${dryRun.runsMs.join(' / ')} (${dryRun.count} ids); countOnly median ${dryRun.countOnlyMedianMs} ms\n` +
        `[bench N=${n}] over HTTP from another process: dry-run median ${dryRun.overHttp?.medianMs} ms of ${dryRun.overHttp?.runsMs.join(' / ')}; countOnly median ${dryRun.overHttp?.countOnlyMedianMs} ms of ${dryRun.overHttp?.countOnlyMs.join(' / ')}\n`,
    );
    return { n, seedMs: round(seedMs), dryRun };
  } finally {
    await stop();
  }
}

export async function child(): Promise<void> {
  // As src/main.ts does at start (HEAP_GROWING_PERCENT).
  tuneHeapGrowth(loadConfig().heapGrowingPercent);
  const n = Number(process.env.BENCH_CHILD_SIZE);
  const result = process.env.BENCH_ONLY === 'dry-run' ? await runDryRunOnly(n) : await runSize(n);
  await writeFile(process.env.BENCH_RESULT_FILE!, JSON.stringify(result));
}
