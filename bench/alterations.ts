/**
 * Alteration throughput benchmark: `npm run bench` (sizes: BENCH_SIZES=10000,100000 by default).
 *
 * The parent process starts what every size shares (Postgres, a Temporal dev server, the workflow bundle)
 * and runs each size in a fresh child process of this same file, so that a size's memory figures
 * (peak RSS, maxRSS) are its own and not the high-water mark of the sizes before it. Each child runs the
 * service in process (API through `app.request`, worker on its own task queue) against a freshly
 * created database, and measures:
 *   seed N suspended instances (one INSERT ... SELECT generate_series), VACUUM ANALYZE;
 *   a plan of one ModifyVariable over all N: submit -> status 4 (polled every ~50 ms), verified in SQL;
 *   the same change as one raw UPDATE (the floor);
 *   dry-run latency (median of 5) with the same filter;
 *   RSS during the plan, maxRSS, the plan's Temporal runs and longest history;
 *   where the time goes: per activity wall time vs time in SQL, CPU of node / postgres / temporal.
 * Results: a table on stdout and bench/results/latest.json.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { AsyncLocalStorage } from 'node:async_hooks';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { constants as perfConstants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { type ActivityInterceptorsFactory, bundleWorkflowCode } from '@temporalio/worker';
import pg from 'pg';
import { createApiKey } from '../src/auth/api-keys.js';
import { loadConfig } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { createPool } from '../src/db/pool.js';
import { type EmbeddedPostgresHandle, startEmbeddedPostgres } from '../src/embedded/postgres.js';
import { createLogger } from '../src/logger.js';
import { createService } from '../src/service.js';
import { startDevServer } from '../src/temporal/devserver.js';
import { installTemporalRuntime } from '../src/temporal/runtime.js';
import { WORKFLOWS_PATH } from '../src/temporal/worker.js';

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
const RESULTS_FILE = path.join(BENCH_DIR, 'results', 'latest.json');
const DEFINITION_ID = 'bench-def';
const PLAN_VALUE = 1001;
const RAW_VALUE = 2002;
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 50);
const PLAN_TIMEOUT_MS = Number(process.env.BENCH_PLAN_TIMEOUT_MS ?? 30 * 60_000);
const DRY_RUNS = 5;

// ---------------------------------------------------------------------------------------------------
// Shapes of the results

interface Stat {
  n: number;
  totalMs: number;
  medianMs: number;
  p95Ms: number;
  maxMs: number;
}

interface SizeResult {
  n: number;
  seedMs: number;
  plan: {
    planId: string;
    /** POST /alterations/submit -> first poll that saw status 4. */
    ms: number;
    submitMs: number;
    instancesPerSecond: number;
    /** From the plan row: created_at -> started_at (workflow start until generateJobs ran) and -> completed_at. */
    serverSide: { createdToStartedMs: number; createdToCompletedMs: number };
    verified: { instancesAltered: number; jobsCompleted: number; jobTotal: number; ok: boolean };
    polls: Stat;
  };
  raw: { ms: number; rows: number; verified: number; ok: boolean };
  ratio: number;
  dryRun: { medianMs: number; runsMs: number[]; count: number; ok: boolean };
  memory: {
    rssBeforePlanMb: number;
    rssPeakDuringPlanMb: number;
    heapUsedPeakDuringPlanMb: number;
    samples: number;
    /** heapUsed right after the major GCs during the plan: the live set, independent of when the GC runs. */
    liveHeapAfterMajorGcMb: { max: number | null; last: number | null; majorGcs: number };
    /** A full GC forced once the plan completed: what the process still holds. */
    afterPlanFullGc: { heapUsedMb: number; rssMb: number } | null;
    /** One sample a second during the plan. */
    timeline: { s: number; rssMb: number; heapUsedMb: number }[];
    /** process.resourceUsage().maxRSS right after the plan (covers start, seed and the plan). */
    maxRssAfterPlanMb: number;
    /** ... and at the end of the size (also covers the dry-runs, which hold all N ids). */
    maxRssAtEndMb: number;
  };
  temporal: {
    runs: number;
    maxHistoryEvents: number;
    historyEvents: number[];
    batchScheduleToStart: Stat;
    batchStartToClose: Stat;
    workflowTasks: Stat;
    /** Sum of batch start-to-close over (window x batch phase span): 1 means a batch always in every slot. */
    windowUtilisation: number;
    batchPhaseMs: number;
  };
  breakdown: {
    activities: Record<string, Stat & { sqlMs: number; queries: number }>;
    /** Worker SQL by statement: total ms, count (client-side: includes pg's row parsing and pool waits). */
    workerSql: { statement: string; n: number; totalMs: number; meanMs: number }[];
    apiSql: { statement: string; n: number; totalMs: number; meanMs: number }[];
    cpu: ReturnType<typeof cpuBetween>;
    /** WAL written while the plan ran, and while the raw UPDATE ran (cluster-wide). */
    walMb: { plan: number | null; raw: number | null };
    eventLoopDelay: { p50Ms: number; p99Ms: number; maxMs: number };
  };
}

interface BenchResults {
  date: string;
  command: string;
  machine: { cpus: number; cpuModel: string; memTotalGb: number; node: string; platform: string };
  config: { batchSize: number; window: number; batchesPerRun: number; pollMs: number; postgres: string; temporal: string };
  sizes: SizeResult[];
  targets: { name: string; ok: boolean; detail: string }[];
}

// ---------------------------------------------------------------------------------------------------
// Small helpers

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;
const round = (v: number, d = 1) => Math.round(v * 10 ** d) / 10 ** d;

function stat(values: number[]): Stat {
  if (values.length === 0) return { n: 0, totalMs: 0, medianMs: 0, p95Ms: 0, maxMs: 0 };
  const s = [...values].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  const total = s.reduce((a, b) => a + b, 0);
  return { n: s.length, totalMs: round(total), medianMs: round(at(0.5)), p95Ms: round(at(0.95)), maxMs: round(s[s.length - 1]!) };
}

function dbUrl(adminUrl: string, database: string): string {
  const u = new URL(adminUrl);
  u.pathname = `/${database}`;
  return u.toString();
}

function redactUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

// ---------------------------------------------------------------------------------------------------
// Instrumentation (bench only): activity wall time, SQL time per statement, CPU per process

interface ActivityStore {
  sqlMs: number;
  queries: number;
}
const activityContext = new AsyncLocalStorage<ActivityStore>();
const activityRecords: { type: string; wallMs: number; sqlMs: number; queries: number }[] = [];
const sqlStats = { worker: new Map<string, { n: number; ms: number }>(), api: new Map<string, { n: number; ms: number }>() };

function statementLabel(query: unknown): string {
  const text = typeof query === 'string' ? query : ((query as { text?: string } | null)?.text ?? '?');
  return text.replace(/\s+/g, ' ').trim().slice(0, 90);
}

function recordQuery(label: string, ms: number, store: ActivityStore | undefined): void {
  const map = store ? sqlStats.worker : sqlStats.api;
  const s = map.get(label) ?? { n: 0, ms: 0 };
  s.n++;
  s.ms += ms;
  map.set(label, s);
  if (store) {
    store.sqlMs += ms;
    store.queries++;
  }
}

function timed(args: unknown[], run: () => Promise<unknown>): Promise<unknown> {
  const store = activityContext.getStore();
  const label = statementLabel(args[0]);
  const started = performance.now();
  return run().finally(() => recordQuery(label, performance.now() - started, store));
}

/**
 * Times every promise-style query of the service pool, on the pool (so pool waits count) and on checked
 * out clients (transactions). pg-pool's own callback-style client.query inside pool.query is skipped, so
 * nothing is counted twice. A query made inside an activity is charged to that activity.
 */
function instrumentPool(pool: pg.Pool): void {
  const poolQuery = pool.query.bind(pool) as (...a: unknown[]) => Promise<unknown>;
  (pool as any).query = (...args: unknown[]) =>
    typeof args[args.length - 1] === 'function' ? poolQuery(...args) : timed(args, () => poolQuery(...args));
  pool.on('connect', (client) => {
    const clientQuery = client.query.bind(client) as (...a: unknown[]) => Promise<unknown>;
    (client as any).query = (...args: unknown[]) =>
      typeof args[args.length - 1] === 'function' ? clientQuery(...args) : timed(args, () => clientQuery(...args));
  });
}

const timingInterceptor: ActivityInterceptorsFactory = (ctx) => ({
  inbound: {
    async execute(input, next) {
      const store: ActivityStore = { sqlMs: 0, queries: 0 };
      const started = performance.now();
      try {
        return await activityContext.run(store, () => next(input));
      } finally {
        activityRecords.push({ type: ctx.info.activityType, wallMs: performance.now() - started, sqlMs: store.sqlMs, queries: store.queries });
      }
    },
  },
});

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

interface ProcEntry {
  ppid: number;
  comm: string;
  /** utime + stime + cutime + cstime, in clock ticks. */
  ticks: number;
}

/** Every process's CPU so far (Linux /proc); empty elsewhere. */
function readProcesses(): Map<number, ProcEntry> {
  const out = new Map<number, ProcEntry>();
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return out;
  }
  for (const pid of pids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    // Fields after "pid (comm) ": state is field 3, ppid 4; utime, stime, cutime, cstime are fields 14..17.
    const f = stat.slice(close + 2).split(' ');
    out.set(Number(pid), { ppid: Number(f[1]), comm, ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]) });
  }
  return out;
}

/** System-wide CPU ticks from /proc/stat: busy (everything but idle and iowait), iowait, total. */
function readSystemCpu(): { busy: number; iowait: number; total: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const v = line.trim().split(/\s+/).slice(1, 9).map(Number);
    const total = v.reduce((a, b) => a + b, 0);
    const idle = v[3]! + v[4]!;
    return { busy: total - idle, iowait: v[4]!, total };
  } catch {
    return undefined;
  }
}

interface CpuSnapshot {
  at: number;
  processes: Map<number, ProcEntry>;
  system: ReturnType<typeof readSystemCpu>;
}

function cpuSnapshot(): CpuSnapshot {
  return { at: performance.now(), processes: readProcesses(), system: readSystemCpu() };
}

/**
 * CPU used between two snapshots, in ms, split over the bench's own process tree (the parent started
 * Postgres and the Temporal dev server, so they are its descendants): this node process, postgres,
 * temporal; and everything else on the machine ("others": another test run would show here). A
 * Postgres or Temporal not started by the bench (DATABASE_URL, TEMPORAL_ADDRESS) counts as "others".
 */
function cpuBetween(a: CpuSnapshot, b: CpuSnapshot) {
  const tickMs = 1000 / ticksPerSecond();
  const root = process.ppid;
  const inTree = (snapshot: CpuSnapshot, pid: number) => {
    for (let p = pid, hops = 0; p > 1 && hops < 50; hops++) {
      if (p === root) return true;
      p = snapshot.processes.get(p)?.ppid ?? 0;
    }
    return false;
  };
  const sums = { node: 0, postgres: 0, temporal: 0, benchParent: 0 };
  const add = (pid: number, comm: string, ticks: number) => {
    if (pid === process.pid) sums.node += ticks;
    else if (comm === 'postgres') sums.postgres += ticks;
    else if (comm === 'temporal') sums.temporal += ticks;
    else sums.benchParent += ticks;
  };
  for (const [pid, e] of b.processes) {
    if (inTree(b, pid)) add(pid, e.comm, e.ticks - (a.processes.get(pid)?.ticks ?? 0));
  }
  // A process that exited in between (an idle pooled connection closing, an autovacuum worker) had its
  // whole lifetime added to its parent's cutime/cstime: take back what it had used before the window.
  for (const [pid, e] of a.processes) {
    if (!b.processes.has(pid) && inTree(a, pid)) add(pid, e.comm, -e.ticks);
  }
  const others = [...b.processes]
    .filter(([pid]) => !inTree(b, pid) && pid !== root)
    .map(([pid, e]) => ({ pid, comm: e.comm, ms: round((e.ticks - (a.processes.get(pid)?.ticks ?? 0)) * tickMs) }))
    .filter((o) => o.ms > 0)
    .sort((x, y) => y.ms - x.ms)
    .slice(0, 5);
  const wallMs = b.at - a.at;
  const sys = a.system && b.system ? { busy: b.system.busy - a.system.busy, iowait: b.system.iowait - a.system.iowait } : undefined;
  const tree = sums.node + sums.postgres + sums.temporal + sums.benchParent;
  return {
    wallMs: round(wallMs),
    cores: os.availableParallelism(),
    nodeMs: round(sums.node * tickMs),
    postgresMs: round(sums.postgres * tickMs),
    temporalMs: round(sums.temporal * tickMs),
    systemBusyMs: sys ? round(sys.busy * tickMs) : null,
    iowaitMs: sys ? round(sys.iowait * tickMs) : null,
    othersMs: sys ? round(Math.max(0, sys.busy - tree) * tickMs) : null,
    /** The busiest processes outside the bench during the window (one that started and ended in it is not seen, but its parent's share of its CPU is). */
    othersTop: others,
  };
}

// ---------------------------------------------------------------------------------------------------
// Temporal history of the plan's runs

type HistoryEvent = Record<string, any>;
const longToNumber = (v: unknown): number => (v == null ? 0 : typeof v === 'number' ? v : Number(String(v)));
const eventMs = (e: HistoryEvent): number => longToNumber(e.eventTime?.seconds) * 1000 + (e.eventTime?.nanos ?? 0) / 1e6;

async function planHistory(client: Client, planId: string, window: number): Promise<SizeResult['temporal']> {
  const workflowId = `alteration-plan-${planId}`;
  // Visibility is eventually consistent: wait until the run that completed the plan is listed.
  let runs: { runId: string; status: string }[] = [];
  for (let attempt = 0; attempt < 100; attempt++) {
    runs = [];
    for await (const info of client.workflow.list({ query: `WorkflowId = "${workflowId}"` })) {
      runs.push({ runId: info.runId, status: info.status.name });
    }
    if (runs.some((r) => r.status === 'COMPLETED')) break;
    await sleep(100);
  }
  const historyEvents: number[] = [];
  const scheduleToStart: number[] = [];
  const startToClose: number[] = [];
  const workflowTasks: number[] = [];
  let phaseStart = Infinity;
  let phaseEnd = -Infinity;
  for (const run of runs) {
    const history = await client.workflow.getHandle(workflowId, run.runId).fetchHistory();
    const events = (history.events ?? []) as HistoryEvent[];
    historyEvents.push(events.length);
    const scheduled = new Map<string, { type: string; at: number }>();
    const started = new Map<string, number>();
    const wftScheduled = new Map<string, number>();
    for (const e of events) {
      const id = String(longToNumber(e.eventId));
      if (e.activityTaskScheduledEventAttributes) {
        scheduled.set(id, { type: e.activityTaskScheduledEventAttributes.activityType?.name ?? '?', at: eventMs(e) });
      } else if (e.activityTaskStartedEventAttributes) {
        started.set(String(longToNumber(e.activityTaskStartedEventAttributes.scheduledEventId)), eventMs(e));
      } else if (e.activityTaskCompletedEventAttributes) {
        const sid = String(longToNumber(e.activityTaskCompletedEventAttributes.scheduledEventId));
        const s = scheduled.get(sid);
        const st = started.get(sid);
        if (s?.type === 'runJobBatch' && st !== undefined) {
          scheduleToStart.push(st - s.at);
          startToClose.push(eventMs(e) - st);
          phaseStart = Math.min(phaseStart, s.at);
          phaseEnd = Math.max(phaseEnd, eventMs(e));
        }
      } else if (e.workflowTaskScheduledEventAttributes) {
        wftScheduled.set(id, eventMs(e));
      } else if (e.workflowTaskCompletedEventAttributes) {
        const at = wftScheduled.get(String(longToNumber(e.workflowTaskCompletedEventAttributes.scheduledEventId)));
        if (at !== undefined) workflowTasks.push(eventMs(e) - at);
      }
    }
  }
  const batchPhaseMs = phaseEnd > phaseStart ? phaseEnd - phaseStart : 0;
  const busy = startToClose.reduce((a, b) => a + b, 0);
  return {
    runs: runs.length,
    maxHistoryEvents: Math.max(0, ...historyEvents),
    historyEvents,
    batchScheduleToStart: stat(scheduleToStart),
    batchStartToClose: stat(startToClose),
    workflowTasks: stat(workflowTasks),
    windowUtilisation: batchPhaseMs > 0 ? round(busy / (window * batchPhaseMs), 2) : 0,
    batchPhaseMs: round(batchPhaseMs),
  };
}

// ---------------------------------------------------------------------------------------------------
// One size, in a child process

const SEED_SQL = `
  INSERT INTO workflow_instances
    (id, tenant_id, definition_id, definition_version_id, version, name, correlation_id, status, sub_status,
     variables, scheduled, bookmarks, created_at, updated_at)
  SELECT gen_random_uuid()::text, '', d.definition_id, d.id, d.version, 'bench-' || n, 'bench-' || n, 'Running', 'Suspended',
         '{"amount":0}'::jsonb, '[]'::jsonb, '[{"activityId":"wait","eventName":"approve"}]'::jsonb,
         now() + n * interval '1 microsecond', now()
    FROM workflow_definitions d, generate_series(1, $2::int) AS n
   WHERE d.id = $1`;

const RAW_UPDATE_SQL = `UPDATE workflow_instances SET variables = jsonb_set(variables, '{amount}', '${RAW_VALUE}'), updated_at = now()
  WHERE tenant_id = '' AND definition_id = $1`;

const lit = (value: unknown, typeName = 'String') => ({ typeName, expression: { type: 'Literal', value } });
const DEFINITION = {
  definitionId: DEFINITION_ID,
  name: 'Bench',
  root: {
    type: 'Elsa.Flowchart',
    id: 'flow1',
    activities: [
      { id: 'start', type: 'Elsa.WriteLine', version: 1, text: lit('start') },
      { id: 'wait', type: 'Elsa.Event', version: 1, eventName: lit('approve') },
    ],
    connections: [{ source: { activity: 'start', port: 'Done' }, target: { activity: 'wait', port: 'In' } }],
  },
  variables: [{ id: 'amount', name: 'Amount', typeName: 'Int32', value: 0 }],
};

async function walLsn(db: pg.Pool): Promise<string | null> {
  const { rows } = await db.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn').catch(() => ({ rows: [] as { lsn: string }[] }));
  return rows[0]?.lsn ?? null;
}

async function walMbSince(db: pg.Pool, from: string | null): Promise<number | null> {
  if (from === null) return null;
  const { rows } = await db.query<{ bytes: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text AS bytes', [from]);
  return mb(Number(rows[0]!.bytes));
}

async function recreateDatabase(adminUrl: string, database: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(database)} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
  } finally {
    await admin.end();
  }
}

function sqlTable(map: Map<string, { n: number; ms: number }>) {
  return [...map.entries()]
    .map(([statement, s]) => ({ statement, n: s.n, totalMs: round(s.ms), meanMs: round(s.ms / s.n, 2) }))
    .sort((a, b) => b.totalMs - a.totalMs)
    .slice(0, 12);
}

async function runSize(n: number): Promise<SizeResult> {
  const adminUrl = process.env.BENCH_PG_ADMIN_URL!;
  const address = process.env.BENCH_TEMPORAL_ADDRESS!;
  const config = loadConfig();
  const logger = createLogger('warn');
  const log = (msg: string) => process.stdout.write(`[bench N=${n}] ${msg}\n`);

  const database = `wfa_bench_${n}`;
  await recreateDatabase(adminUrl, database);
  const url = dbUrl(adminUrl, database);
  // The bench's own statements (seed, verify, the raw UPDATE) go through a pool of their own, uncounted.
  const benchPool = createPool(url, 2);
  await migrate(benchPool);

  // The service as production wires it (src/service.ts), in process: API through `app.request`, the
  // worker on its own task queue, both pools counted.
  const taskQueue = `wfa-bench-${n}-${process.pid}`;
  const service = await createService(
    {
      ...config,
      databaseUrl: url,
      authSigningKey: randomBytes(32).toString('base64url'),
      adminApiKey: `wfa_unused_${randomBytes(8).toString('hex')}`,
      temporal: { ...config.temporal, address, taskQueue },
    },
    {
      logger,
      listen: false,
      workflowBundlePath: process.env.BENCH_WORKFLOW_BUNDLE,
      workerOptions: { interceptors: { activity: [timingInterceptor] } },
      onPool: (p) => instrumentPool(p),
    },
  );
  const pool = service.pool;
  const client = service.client;
  const stop = async () => {
    await service.stop();
    await benchPool.end();
  };

  try {
    const app = service.app!;
    const admin = await createApiKey(pool, { name: 'bench admin', permissions: ['*'], tenantKey: '' });
    const api = async <T = any>(method: string, p: string, body?: unknown): Promise<{ status: number; body: T }> => {
      const headers: Record<string, string> = { authorization: `ApiKey ${admin.key}` };
      let text: string | undefined;
      if (body !== undefined) {
        text = JSON.stringify(body);
        headers['content-type'] = 'application/json';
        headers['content-length'] = String(Buffer.byteLength(text));
      }
      const res = await app.request(p, { method, headers, ...(text !== undefined ? { body: text } : {}) });
      const raw = await res.text();
      return { status: res.status, body: (raw ? JSON.parse(raw) : undefined) as T };
    };
    const expectStatus = (r: { status: number; body: unknown }, status: number, what: string) => {
      if (r.status !== status) throw new Error(`${what}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 500)}`);
    };

    // 1. Definition through the API, N instances in one statement, statistics.
    const def = await api<{ id: string }>('POST', '/workflow-definitions', DEFINITION);
    expectStatus(def, 201, 'publish definition');
    let t = performance.now();
    const seeded = await benchPool.query(SEED_SQL, [def.body.id, n]);
    const seedMs = performance.now() - t;
    if (seeded.rowCount !== n) throw new Error(`seeded ${seeded.rowCount} instances, expected ${n}`);
    await benchPool.query('VACUUM ANALYZE workflow_instances');
    await benchPool.query('CHECKPOINT').catch(() => undefined); // superuser only; just less noise
    log(`seeded ${n} instances in ${round(seedMs / 1000, 2)} s`);

    // 2. The plan: submit -> status 4, polled; memory, CPU and event loop sampled meanwhile.
    const filter = { definitionIds: [DEFINITION_ID] };
    activityRecords.length = 0;
    sqlStats.worker.clear();
    sqlStats.api.clear();
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    let heapPeak = process.memoryUsage().heapUsed;
    let samples = 0;
    const timeline: { s: number; rssMb: number; heapUsedMb: number }[] = [];
    const samplingFrom = performance.now();
    const sampler = setInterval(() => {
      const m = process.memoryUsage();
      rssPeak = Math.max(rssPeak, m.rss);
      heapPeak = Math.max(heapPeak, m.heapUsed);
      if (samples++ % 20 === 0) timeline.push({ s: round((performance.now() - samplingFrom) / 1000), rssMb: mb(m.rss), heapUsedMb: mb(m.heapUsed) });
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
    const walBeforePlan = await walLsn(benchPool);
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    const cpu0 = cpuSnapshot();

    const t0 = performance.now();
    const submit = await api<{ planId: string }>('POST', '/alterations/submit', {
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: PLAN_VALUE }],
      filter,
    });
    const submitMs = performance.now() - t0;
    expectStatus(submit, 202, 'submit');
    const planId = submit.body.planId;
    const polls: number[] = [];
    let planMs: number;
    for (;;) {
      const p0 = performance.now();
      const r = await api<{ plan: { status: number } }>('GET', `/alterations/${planId}`);
      const now = performance.now();
      polls.push(now - p0);
      expectStatus(r, 200, 'read plan');
      if (r.body.plan.status === 4) {
        planMs = now - t0;
        break;
      }
      if (r.body.plan.status > 4) throw new Error(`plan ended with status ${r.body.plan.status}`);
      if (now - t0 > PLAN_TIMEOUT_MS) throw new Error(`plan not completed after ${PLAN_TIMEOUT_MS} ms`);
      await sleep(POLL_MS);
    }
    const cpu1 = cpuSnapshot();
    loopDelay.disable();
    clearInterval(sampler);
    gcObserver.disconnect();
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    const afterPlanGc = gc ? process.memoryUsage() : undefined;
    const walPlan = await walMbSince(benchPool, walBeforePlan);
    const maxRssAfterPlan = process.resourceUsage().maxRSS * 1024;
    log(`plan ${planId} completed in ${round(planMs / 1000, 2)} s (${Math.round(n / (planMs / 1000))} instances/s)`);

    const { rows: planRows } = await benchPool.query<{ created: Date; started: Date; completed: Date; job_total: number }>(
      'SELECT created_at AS created, started_at AS started, completed_at AS completed, job_total FROM alteration_plans WHERE id = $1',
      [planId],
    );
    const planRow = planRows[0]!;
    const { rows: altered } = await benchPool.query<{ n: number }>(
      `SELECT count(*) AS n FROM workflow_instances WHERE tenant_id = '' AND definition_id = $1 AND variables->'amount' = $2::jsonb`,
      [DEFINITION_ID, JSON.stringify(PLAN_VALUE)],
    );
    const { rows: jobs } = await benchPool.query<{ n: number }>('SELECT count(*) AS n FROM alteration_jobs WHERE plan_id = $1 AND status = 2', [planId]);
    const verified = { instancesAltered: altered[0]!.n, jobsCompleted: jobs[0]!.n, jobTotal: planRow.job_total };
    const planOk = verified.instancesAltered === n && verified.jobsCompleted === n && verified.jobTotal === n;
    if (!planOk) log(`VERIFICATION FAILED: ${JSON.stringify(verified)}`);

    const temporal = await planHistory(client, planId, config.alterations.window);
    const activities: SizeResult['breakdown']['activities'] = {};
    for (const type of [...new Set(activityRecords.map((a) => a.type))]) {
      const of = activityRecords.filter((a) => a.type === type);
      activities[type] = {
        ...stat(of.map((a) => a.wallMs)),
        sqlMs: round(of.reduce((s, a) => s + a.sqlMs, 0)),
        queries: of.reduce((s, a) => s + a.queries, 0),
      };
    }
    const workerSql = sqlTable(sqlStats.worker);
    const apiSql = sqlTable(sqlStats.api);

    // 3. The floor: the same change as one UPDATE, on a vacuumed table, after a checkpoint.
    await benchPool.query('VACUUM ANALYZE workflow_instances');
    await benchPool.query('CHECKPOINT').catch(() => undefined);
    const walBeforeRaw = await walLsn(benchPool);
    t = performance.now();
    const rawRes = await benchPool.query(RAW_UPDATE_SQL, [DEFINITION_ID]);
    const rawMs = performance.now() - t;
    const walRaw = await walMbSince(benchPool, walBeforeRaw);
    const { rows: rawRows } = await benchPool.query<{ n: number }>(
      `SELECT count(*) AS n FROM workflow_instances WHERE tenant_id = '' AND definition_id = $1 AND variables->'amount' = $2::jsonb`,
      [DEFINITION_ID, JSON.stringify(RAW_VALUE)],
    );
    const raw = { ms: round(rawMs), rows: rawRes.rowCount ?? 0, verified: rawRows[0]!.n, ok: rawRes.rowCount === n && rawRows[0]!.n === n };
    log(`raw UPDATE in ${round(rawMs / 1000, 2)} s`);

    // 4. Dry-run latency, the median of five, on a vacuumed table with statistics.
    await benchPool.query('VACUUM ANALYZE workflow_instances');
    const dryRuns: number[] = [];
    let dryCount = -1;
    for (let i = 0; i < DRY_RUNS; i++) {
      const d0 = performance.now();
      const r = await api<{ workflowInstanceIds: string[] }>('POST', '/alterations/dry-run', filter);
      dryRuns.push(round(performance.now() - d0));
      expectStatus(r, 200, 'dry-run');
      dryCount = r.body.workflowInstanceIds.length;
      if (dryCount !== n) break;
    }
    const dryMedian = stat(dryRuns).medianMs;
    log(`dry-run median ${dryMedian} ms (${dryCount} ids)`);

    return {
      n,
      seedMs: round(seedMs),
      plan: {
        planId,
        ms: round(planMs),
        submitMs: round(submitMs),
        instancesPerSecond: Math.round(n / (planMs / 1000)),
        serverSide: {
          createdToStartedMs: planRow.started.getTime() - planRow.created.getTime(),
          createdToCompletedMs: planRow.completed.getTime() - planRow.created.getTime(),
        },
        verified: { ...verified, ok: planOk },
        polls: stat(polls),
      },
      raw,
      ratio: round(planMs / rawMs, 2),
      dryRun: { medianMs: dryMedian, runsMs: dryRuns, count: dryCount, ok: dryCount === n },
      memory: {
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
        maxRssAfterPlanMb: mb(maxRssAfterPlan),
        maxRssAtEndMb: mb(process.resourceUsage().maxRSS * 1024),
      },
      temporal,
      breakdown: {
        activities,
        workerSql,
        apiSql,
        cpu: cpuBetween(cpu0, cpu1),
        walMb: { plan: walPlan, raw: walRaw },
        eventLoopDelay: {
          p50Ms: round(loopDelay.percentile(50) / 1e6),
          p99Ms: round(loopDelay.percentile(99) / 1e6),
          maxMs: round(loopDelay.max / 1e6),
        },
      },
    };
  } finally {
    await stop();
  }
}

async function child(): Promise<void> {
  const n = Number(process.env.BENCH_CHILD_SIZE);
  const result = await runSize(n);
  await writeFile(process.env.BENCH_RESULT_FILE!, JSON.stringify(result));
}

// ---------------------------------------------------------------------------------------------------
// The parent: shared infrastructure, one child per size, the report

function parseSizes(): number[] {
  const sizes = (process.env.BENCH_SIZES ?? '10000,100000')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map(Number);
  if (sizes.length === 0 || sizes.some((s) => !Number.isInteger(s) || s < 1)) {
    throw new Error(`BENCH_SIZES must be a comma-separated list of positive integers, not "${process.env.BENCH_SIZES}"`);
  }
  return sizes;
}

function runChild(size: number, env: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    // --expose-gc: only to read the live heap after a full GC once the plan is done (it changes nothing else).
    const proc = spawn(process.execPath, [...process.execArgv, '--expose-gc', fileURLToPath(import.meta.url)], {
      env: { ...process.env, ...env, BENCH_CHILD_SIZE: String(size) },
      stdio: 'inherit',
    });
    proc.on('error', reject);
    proc.on('exit', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`size ${size}: child exited with ${signal ?? `code ${code}`}`)),
    );
  });
}

function evaluateTargets(sizes: SizeResult[]): BenchResults['targets'] {
  const targets: BenchResults['targets'] = [];
  for (const s of sizes) {
    targets.push({
      name: `N=${s.n}: >= 10,000 instances/s through a plan`,
      ok: s.plan.instancesPerSecond >= 10_000,
      detail: `${s.plan.instancesPerSecond}/s`,
    });
    targets.push({ name: `N=${s.n}: plan within 5x of the raw UPDATE`, ok: s.ratio <= 5, detail: `${s.ratio}x` });
    targets.push({ name: `N=${s.n}: dry-run < 1 s`, ok: s.dryRun.medianMs < 1000, detail: `${s.dryRun.medianMs} ms median` });
    targets.push({
      name: `N=${s.n}: verified (all instances altered, all jobs Completed, raw UPDATE all rows, dry-run count)`,
      ok: s.plan.verified.ok && s.raw.ok && s.dryRun.ok,
      detail: `${s.plan.verified.instancesAltered}/${s.n} altered, ${s.plan.verified.jobsCompleted}/${s.n} jobs, raw ${s.raw.verified}/${s.n}, dry-run ${s.dryRun.count}`,
    });
  }
  if (sizes.length >= 2) {
    const small = sizes.reduce((a, b) => (a.n <= b.n ? a : b));
    const large = sizes.reduce((a, b) => (a.n >= b.n ? a : b));
    const growth = large.memory.rssPeakDuringPlanMb / small.memory.rssPeakDuringPlanMb;
    targets.push({
      name: `memory flat as N grows: peak RSS during the plan at N=${large.n} within 1.25x of N=${small.n}`,
      ok: growth <= 1.25,
      detail: `${small.memory.rssPeakDuringPlanMb} MB -> ${large.memory.rssPeakDuringPlanMb} MB (${round(growth, 2)}x)`,
    });
    const liveSmall = small.memory.afterPlanFullGc?.heapUsedMb;
    const liveLarge = large.memory.afterPlanFullGc?.heapUsedMb;
    if (liveSmall !== undefined && liveLarge !== undefined) {
      targets.push({
        name: `memory flat as N grows: heap held after the plan (full GC) at N=${large.n} within 1.25x of N=${small.n}`,
        ok: liveLarge <= 1.25 * liveSmall,
        detail: `${liveSmall} MB -> ${liveLarge} MB (${round(liveLarge / liveSmall, 2)}x)`,
      });
    }
  }
  return targets;
}

const pct = (v: number | null, of: number) => (v === null ? 'n/a' : `${Math.round((100 * v) / of)}%`);

function printTable(results: BenchResults): void {
  const sizes = results.sizes;
  const rows: [string, (s: SizeResult) => string][] = [
    ['seed: INSERT ... generate_series', (s) => `${round(s.seedMs / 1000, 2)} s`],
    ['plan: submit -> status 4', (s) => `${round(s.plan.ms / 1000, 2)} s`],
    ['  instances/s through the plan', (s) => String(s.plan.instancesPerSecond)],
    ['  server side: created -> started / completed', (s) => `${s.plan.serverSide.createdToStartedMs} / ${s.plan.serverSide.createdToCompletedMs} ms`],
    ['  submit request', (s) => `${s.plan.submitMs} ms`],
    ['  polls (n, median ms)', (s) => `${s.plan.polls.n}, ${s.plan.polls.medianMs}`],
    ['  verified: altered / jobs status 2', (s) => `${s.plan.verified.instancesAltered} / ${s.plan.verified.jobsCompleted}`],
    ['raw UPDATE (floor)', (s) => `${round(s.raw.ms / 1000, 2)} s`],
    ['ratio plan / raw UPDATE', (s) => `${s.ratio}x`],
    ['dry-run median of 5 (count)', (s) => `${s.dryRun.medianMs} ms (${s.dryRun.count})`],
    ['RSS before plan / peak during plan', (s) => `${s.memory.rssBeforePlanMb} / ${s.memory.rssPeakDuringPlanMb} MB`],
    ['heapUsed peak / live after major GC (max, n)', (s) => {
      const g = s.memory.liveHeapAfterMajorGcMb;
      return `${s.memory.heapUsedPeakDuringPlanMb} / ${g.max ?? '-'} MB (${g.majorGcs})`;
    }],
    ['after the plan, forced full GC: heapUsed / RSS', (s) =>
      s.memory.afterPlanFullGc ? `${s.memory.afterPlanFullGc.heapUsedMb} / ${s.memory.afterPlanFullGc.rssMb} MB` : '-'],
    ['maxRSS after plan / at end', (s) => `${s.memory.maxRssAfterPlanMb} / ${s.memory.maxRssAtEndMb} MB`],
    ['Temporal runs / longest history', (s) => `${s.temporal.runs} / ${s.temporal.maxHistoryEvents} events`],
    ['generateJobs activity', (s) => `${s.breakdown.activities.generateJobs?.totalMs ?? '-'} ms`],
    ['runJobBatch: count, median, p95', (s) => {
      const b = s.breakdown.activities.runJobBatch;
      return b ? `${b.n}, ${b.medianMs}, ${b.p95Ms} ms` : '-';
    }],
    ['  of which in SQL (incl. row parsing)', (s) => {
      const b = s.breakdown.activities.runJobBatch;
      return b ? `${Math.round((100 * b.sqlMs) / b.totalMs)} %` : '-';
    }],
    ['  schedule-to-start median', (s) => `${s.temporal.batchScheduleToStart.medianMs} ms`],
    ['  window utilisation', (s) => `${Math.round(s.temporal.windowUtilisation * 100)} %`],
    ['CPU in plan: node / postgres / temporal', (s) => {
      const c = s.breakdown.cpu;
      return `${pct(c.nodeMs, c.wallMs)} / ${pct(c.postgresMs, c.wallMs)} / ${pct(c.temporalMs, c.wallMs)} of ${c.cores * 100}%`;
    }],
    ['  machine busy / iowait / other processes', (s) => {
      const c = s.breakdown.cpu;
      return `${pct(c.systemBusyMs, c.wallMs)} / ${pct(c.iowaitMs, c.wallMs)} / ${pct(c.othersMs, c.wallMs)}`;
    }],
    ['WAL written: plan / raw UPDATE', (s) => `${s.breakdown.walMb.plan ?? '-'} / ${s.breakdown.walMb.raw ?? '-'} MB`],
    ['event loop delay p99 / max', (s) => `${s.breakdown.eventLoopDelay.p99Ms} / ${s.breakdown.eventLoopDelay.maxMs} ms`],
  ];
  const header = ['', ...sizes.map((s) => `N = ${s.n}`)];
  const table = [header, ...rows.map(([label, f]) => [label, ...sizes.map(f)])];
  const widths = header.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const out = [
    '',
    `Alteration benchmark, ${results.date}: ${results.machine.cpus} cores, node ${results.machine.node}; ` +
      `batchSize ${results.config.batchSize}, window ${results.config.window}, batchesPerRun ${results.config.batchesPerRun}, poll ${results.config.pollMs} ms`,
    '',
    line(table[0]!),
    ...table.slice(1).map(line),
    ...sizes
      .filter((s) => s.breakdown.cpu.othersMs !== null && s.breakdown.cpu.othersMs > 0.1 * s.breakdown.cpu.wallMs)
      .map(
        (s) =>
          `WARNING: other processes used ${pct(s.breakdown.cpu.othersMs, s.breakdown.cpu.wallMs)} CPU during the N=${s.n} plan; its figures are disturbed` +
          ` (busiest: ${s.breakdown.cpu.othersTop.map((o) => `${o.comm} ${o.ms} ms`).join(', ') || 'processes that started meanwhile'}).`,
      ),
    '',
    'Targets:',
    ...results.targets.map((t) => `  ${t.ok ? 'MET   ' : 'MISSED'}  ${t.name}: ${t.detail}`),
    '',
    `Worker SQL at the largest N (client-side ms):`,
    ...(sizes[sizes.length - 1]?.breakdown.workerSql ?? []).map((q) => `  ${String(q.totalMs).padStart(9)} ms  ${String(q.n).padStart(5)}x  ${q.statement}`),
    '',
    `JSON: ${path.relative(process.cwd(), RESULTS_FILE)}`,
    '',
  ];
  process.stdout.write(out.join('\n'));
}

async function parent(): Promise<void> {
  const sizes = parseSizes();
  const config = loadConfig();
  const logger = createLogger('warn');
  installTemporalRuntime(logger);
  const stops: (() => Promise<unknown>)[] = [];
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-bench-'));
  stops.push(() => rm(work, { recursive: true, force: true }));
  const log = (msg: string) => process.stdout.write(`[bench] ${msg}\n`);

  try {
    let adminUrl: string;
    let pgDescription: string;
    if (process.env.DATABASE_URL) {
      const u = new URL(process.env.DATABASE_URL);
      u.pathname = '/postgres';
      adminUrl = u.toString();
      pgDescription = `DATABASE_URL ${redactUrl(adminUrl)}`;
    } else {
      const port = Number(process.env.BENCH_PG_PORT ?? 54339);
      const dataDir = path.join(os.tmpdir(), 'wfa-bench-pg');
      const handle: EmbeddedPostgresHandle = await startEmbeddedPostgres({ dataDir, port, database: 'postgres', logger });
      stops.unshift(() => handle.stop());
      adminUrl = handle.adminUrl;
      pgDescription = `embedded, port ${port}, data in ${dataDir}`;
      const version = new pg.Client({ connectionString: adminUrl });
      await version.connect();
      const { rows } = await version.query<{ v: string }>("SELECT current_setting('server_version') AS v").catch(() => ({ rows: [{ v: '?' }] }));
      await version.end();
      pgDescription = `embedded Postgres ${rows[0]?.v ?? '?'}, port ${port}, data in ${dataDir}`;
    }

    let address: string;
    let temporalDescription: string;
    if (config.temporal.address) {
      address = config.temporal.address;
      temporalDescription = `TEMPORAL_ADDRESS ${address}`;
    } else {
      const env = await startDevServer({
        cliPath: config.temporal.cliPath,
        dbFilename: path.join(work, 'temporal.sqlite'),
        namespace: config.temporal.namespace,
        port: Number(process.env.BENCH_TEMPORAL_PORT ?? 7243),
        uiPort: 0,
      });
      stops.unshift(() => env.teardown());
      address = env.address;
      temporalDescription = `dev server ${address}, SQLite in ${work}`;
    }
    log(`Postgres: ${pgDescription}`);
    log(`Temporal: ${temporalDescription}`);

    const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietBundleLogger });
    const bundle = path.join(work, 'workflow-bundle.js');
    await writeFile(bundle, code);

    const results: SizeResult[] = [];
    for (const size of sizes) {
      log(`N = ${size}: starting a fresh process and database`);
      const resultFile = path.join(work, `result-${size}.json`);
      await runChild(size, {
        BENCH_PG_ADMIN_URL: adminUrl,
        BENCH_TEMPORAL_ADDRESS: address,
        BENCH_WORKFLOW_BUNDLE: bundle,
        BENCH_RESULT_FILE: resultFile,
      });
      results.push(JSON.parse(await readFile(resultFile, 'utf8')) as SizeResult);
    }

    const cpus = os.cpus();
    const report: BenchResults = {
      date: new Date().toISOString(),
      command: `BENCH_SIZES=${sizes.join(',')} npm run bench`,
      machine: {
        cpus: os.availableParallelism(),
        cpuModel: cpus[0]?.model ?? '?',
        memTotalGb: round(os.totalmem() / 1024 ** 3),
        node: process.version,
        platform: `${os.platform()} ${os.release()}`,
      },
      config: { ...config.alterations, pollMs: POLL_MS, postgres: pgDescription, temporal: temporalDescription },
      sizes: results,
      targets: evaluateTargets(results),
    };
    await mkdir(path.dirname(RESULTS_FILE), { recursive: true });
    await writeFile(RESULTS_FILE, JSON.stringify(report, null, 2) + '\n');
    printTable(report);
  } finally {
    for (const stop of stops) await stop().catch((err: unknown) => log(`error while stopping: ${String(err)}`));
  }
}

const noop = () => undefined;
const quietBundleLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: console.error, log: noop };

const main = process.env.BENCH_CHILD_SIZE ? child : parent;
main().then(
  () => undefined,
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    if (err instanceof Error && err.cause) process.stderr.write(`  cause: ${String((err.cause as Error).message ?? err.cause)}\n`);
    process.exit(1);
  },
);
