/**
 * Engine benchmark: `npm run bench:engine` (N = BENCH_ENGINE_N, default 10,000).
 *
 * One run, one Temporal dev server (started here with `npm start`'s flags and the SQLite settings of
 * BENCH_ENGINE_DEVSERVER: file | wal | memory, see bench/engine-devserver.ts), and:
 *
 * 1. the service, started as `npm start` starts it (its own process, a fresh DATA_DIR, its embedded Postgres,
 *    TEMPORAL_ADDRESS the dev server), spoken to over HTTP only;
 * 2. the baseline: one bare Temporal workflow per instance (bench/engine-baseline-workflow.ts: local activity
 *    WriteLine inserts a row, wait for a signal, local activity SetVariable updates the row), bundled by its own
 *    worker process (bench/engine-baseline-worker.ts) on its own task queue, its table in a database of its
 *    own on the service's Postgres cluster (so both write to the same Postgres);
 *    N starts by 16 concurrent starters, then N signals by 16 concurrent signallers;
 * 3. the service: a definition WriteLine → Event "go" → SetVariable published through the API,
 *    a. N instances by 16 concurrent `POST /workflow-instances`,
 *    b. one `POST /events/go/trigger` resuming them all,
 *    c. a second batch of N, then a plan `ScheduleActivity set` over it (`POST /alterations/submit`);
 *    d. the memory of the service's process tree, sampled every 200 ms;
 *    e. how long until `temporal workflow count` shows N `instanceExecution` workflows Running (after a) and
 *       Completed (after b): reported, not asserted;
 *    f. (phase d on both sides) instances whose one step is a Send HTTP Request to a local endpoint of the
 *       bench's, against bare workflows whose one regular activity calls it: started to done, per second.
 *
 * Progress is measured by reading Postgres directly (counts by status, the variable's value; one connection,
 * every BENCH_ENGINE_POLL_MS = 50 ms), and checked once per phase through the API's list. Results: a table
 * on stdout, bench/results/engine-latest.json (BENCH_ENGINE_RESULTS_FILE), targets as PASS/FAIL lines (the
 * exit code does not depend on them).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import pg from 'pg';
import { loadConfig } from '../src/config.js';
import { passwordFileOf } from '../src/embedded/postgres.js';
import { postgresDataDirOf } from '../src/embedded/leftovers.js';
import { freePort } from '../test/support/free-port.js';
import {
  type BenchDevServer,
  countWorkflows,
  DEV_SERVER_MODES,
  type DevServerMode,
  startBenchDevServer,
  temporalCli,
} from './engine-devserver.js';
import { cpuMark, type CpuMark, cpuSplit, type CpuSplit, machine, TreeSampler } from './engine-procs.js';
import { type HeapSample, HeapSampler } from './engine-heap.js';
import { NODE_MEMORY_FLAGS, WORKFLOW_VM_PRELOAD } from '../src/memory.js';
import { planHistory } from './history.js';
import { HTTP_CONNECTION_TYPE, oneCallDefinition, round, sleep, stat } from './util.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer, not "${raw}"`);
  return v;
}

const N = intEnv('BENCH_ENGINE_N', 10_000);
const CLIENTS = intEnv('BENCH_ENGINE_CLIENTS', 16);
const POLL_MS = intEnv('BENCH_ENGINE_POLL_MS', 50);
/** Longest wait for a phase to reach N in Postgres (the bench fails past it). */
const WAIT_MS = intEnv('BENCH_ENGINE_TIMEOUT_MS', 30 * 60_000);
/** Longest wait for Temporal's count to reach N (then the count reached is reported and the bench goes on). */
const TEMPORAL_WAIT_MS = intEnv('BENCH_ENGINE_TEMPORAL_WAIT_MS', 10 * 60_000);
const TEMPORAL_POLL_MS = 250;
/** The service, its Postgres, the baseline worker and the dev server together below this (% of one core): quiet. */
const QUIET_PERCENT = intEnv('BENCH_ENGINE_QUIET_PERCENT', 15);
const MODE = (process.env.BENCH_ENGINE_DEVSERVER ?? 'wal') as DevServerMode;
if (!DEV_SERVER_MODES.includes(MODE))
  throw new Error(`BENCH_ENGINE_DEVSERVER must be one of ${DEV_SERVER_MODES.join(', ')}, not "${MODE}"`);
const RESULTS_FILE = process.env.BENCH_ENGINE_RESULTS_FILE ?? path.join(ROOT, 'bench', 'results', 'engine-latest.json');
const KEEP = process.env.BENCH_ENGINE_KEEP === '1';
/** Instances run to the end before the measured phases, on both sides (0: none). */
const WARMUP = Number(process.env.BENCH_ENGINE_WARMUP ?? 20);

const NAMESPACE = 'default';
const BASELINE_QUEUE = 'bench-engine-baseline';
const BASELINE_TYPE = 'baselineInstance';
const INSTANCE_TYPE = 'instanceExecution';
const DEFINITION_ID = 'engine-bench';
const EVENT_NAME = 'go';
const SET_ACTIVITY = 'set';
const SET_VALUE = 42;
const WARMUP_DEFINITION_ID = 'engine-bench-warm-up';
/**
 * d. The outbound-call phase (BENCH_ENGINE_CALLS=0 leaves it out): CALL_N (BENCH_ENGINE_CALL_N, default N up
 * to 2,000) instances of a definition whose one step is a Send HTTP Request to a local endpoint, against CALL_N
 * bare Temporal workflows whose regular activity calls the same endpoint (then a local activity writes the
 * row). Tenant shares as configured by default (the service's outbound share per tenant on).
 */
const CALLS = process.env.BENCH_ENGINE_CALLS !== '0';
/** c.burst: phase c's plan again right after N more starts (BENCH_ENGINE_BURST=0 leaves it out). */
const BURST = process.env.BENCH_ENGINE_BURST !== '0';
const CALL_N = intEnv('BENCH_ENGINE_CALL_N', Math.min(N, 2_000));
const CALL_DEFINITION_ID = 'engine-bench-call';
const CALL_CONNECTION = 'engine-bench-endpoint';
const BASELINE_CALL_TYPE = 'baselineCall';
const WARMUP_EVENT = 'warm-up';

const lit = (value: unknown, typeName = 'String') => ({ typeName, expression: { type: 'Literal', value } });
const connect = (source: string, target: string) => ({
  source: { activity: source, port: 'Done' },
  target: { activity: target, port: 'In' },
});
/** The service's test definition: WriteLine → Event "go" → SetVariable result = 42. */
export const ENGINE_DEFINITION = {
  definitionId: DEFINITION_ID,
  name: 'Engine bench',
  variables: [{ id: 'result', name: 'Result', typeName: 'Int32', value: 0 }],
  root: {
    type: 'Elsa.Flowchart',
    id: 'flow1',
    activities: [
      { id: 'write', type: 'Elsa.WriteLine', version: 1, text: lit('started') },
      { id: 'wait', type: 'Elsa.Event', version: 1, eventName: lit(EVENT_NAME) },
      {
        id: SET_ACTIVITY,
        type: 'Elsa.SetVariable',
        version: 1,
        variable: lit('result'),
        value: lit(SET_VALUE, 'Int32'),
      },
    ],
    connections: [connect('write', 'wait'), connect('wait', SET_ACTIVITY)],
  },
};

const log = (msg: string) => process.stdout.write(`[engine] ${msg}\n`);

// ---------------------------------------------------------------------------------------------------
// Measuring helpers

interface Fired {
  ms: number;
  perSecond: number;
  latency: ReturnType<typeof stat>;
  /** Requests answered 429/503 or refused, then sent again. */
  retries: number;
}

class Refused extends Error {}

/** `n` requests by `clients` concurrent clients, each taking the next index; a refused one is sent again. */
async function fire(n: number, clients: number, request: (i: number) => Promise<void>): Promise<Fired> {
  let next = 0;
  let retries = 0;
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(clients, n) }, async () => {
      for (let i = next++; i < n; i = next++) {
        for (let attempt = 1; ; attempt++) {
          const t = performance.now();
          try {
            await request(i);
            latencies.push(performance.now() - t);
            break;
          } catch (err) {
            if (!(err instanceof Refused) || attempt >= 10) throw err;
            retries++;
            await sleep(50 * attempt);
          }
        }
      }
    }),
  );
  const ms = performance.now() - t0;
  return { ms: round(ms), perSecond: round((n / ms) * 1000), latency: stat(latencies), retries };
}

interface Reached {
  /** From the phase's start until the count reached the target; null if it did not within the wait. */
  ms: number | null;
  perSecond: number | null;
  /** The last count read. */
  count: number;
}

/** Reads `read()` every `pollMs` until it reaches `target`; the time is counted from `t0`. */
async function reach(
  what: string,
  t0: number,
  target: number,
  read: () => Promise<number>,
  o: { pollMs: number; timeoutMs: number; required: boolean },
): Promise<Reached> {
  let lastLog = performance.now();
  let count = 0;
  for (;;) {
    count = await read();
    const now = performance.now();
    if (count >= target) {
      const ms = now - t0;
      return { ms: round(ms), perSecond: round((target / ms) * 1000), count };
    }
    if (now - t0 > o.timeoutMs) {
      if (o.required) throw new Error(`${what}: ${count} of ${target} after ${round((now - t0) / 1000)} s`);
      log(`${what}: ${count} of ${target} after ${round((now - t0) / 1000)} s; going on`);
      return { ms: null, perSecond: null, count };
    }
    if (now - lastLog > 10_000) {
      log(`  ${what}: ${count} of ${target} after ${round((now - t0) / 1000)} s`);
      lastLog = now;
    }
    await sleep(o.pollMs);
  }
}

const inPostgres = (what: string, t0: number, read: () => Promise<number>) =>
  reach(what, t0, N, read, { pollMs: POLL_MS, timeoutMs: WAIT_MS, required: true });

// ---------------------------------------------------------------------------------------------------
// The run

interface Context {
  work: string;
  cli: string;
  dev: BenchDevServer;
  /** The service's Postgres cluster, as its superuser (measuring and the baseline's database only). */
  pgBase: string;
  serviceSampler: TreeSampler;
  groups: () => Record<string, number | undefined>;
  /** The local endpoint both sides call in phase d, and how many calls it has answered. */
  endpoint: { url: string; calls: () => number };
}

const counter = (ctx: Context, query: string) => () => countWorkflows(ctx.cli, ctx.dev.address, NAMESPACE, query);
/**
 * Until `temporal workflow count -q <query>` shows N more executions than `offset` (those from before the
 * phase: the warm-up's, an earlier phase's); the count reported is the phase's own.
 */
const inTemporal = (ctx: Context, what: string, t0: number, query: string, offset: number) =>
  reach(what, t0, N, async () => (await counter(ctx, query)()) - offset, {
    pollMs: TEMPORAL_POLL_MS,
    timeoutMs: TEMPORAL_WAIT_MS,
    required: false,
  });
const RUNNING = (type: string) => `WorkflowType='${type}' AND ExecutionStatus='Running'`;
const COMPLETED = (type: string) => `WorkflowType='${type}' AND ExecutionStatus='Completed'`;

/**
 * Until the service, its Postgres, the baseline worker and the dev server are quiet again (together under
 * QUIET_PERCENT of one core over a second): work a phase left queued (the instance workflows' first tasks, the
 * relay's signals) is done before the next phase is measured. The time is counted from `t0` to the start of
 * the first quiet second; null if they were not quiet within BENCH_ENGINE_TEMPORAL_WAIT_MS.
 */
async function quiet(ctx: Context, what: string, t0: number): Promise<number | null> {
  for (;;) {
    const from = cpuMark();
    await sleep(1000);
    const split = cpuSplit(from, cpuMark(), ctx.groups());
    const busy = Object.entries(split.percent)
      .filter(([group]) => group !== 'bench')
      .reduce((sum, [, p]) => sum + p, 0);
    if (busy < QUIET_PERCENT) return round(from.at - t0);
    if (performance.now() - t0 > TEMPORAL_WAIT_MS) {
      log(`${what}: still busy (${Math.round(busy)}% of a core) after ${round((performance.now() - t0) / 1000)} s`);
      return null;
    }
  }
}

async function queryCount(db: pg.Client, sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await db.query<{ n: string }>(sql, params);
  return Number(rows[0]?.n ?? 0);
}

function cpuOf(ctx: Context, from: CpuMark): CpuSplit {
  return cpuSplit(from, cpuMark(), ctx.groups());
}

// --- the baseline ------------------------------------------------------------------------------------

async function runBaseline(ctx: Context, stops: (() => Promise<unknown>)[]) {
  const admin = new pg.Client({ connectionString: `${ctx.pgBase}/postgres` });
  await admin.connect();
  await admin.query('DROP DATABASE IF EXISTS engine_baseline WITH (FORCE)');
  await admin.query('CREATE DATABASE engine_baseline');
  await admin.end();
  const dbUrl = `${ctx.pgBase}/engine_baseline`;

  log('baseline: starting its worker (bundling bench/engine-baseline-workflow.ts)');
  const worker = spawn(
    process.execPath,
    ['--import', 'tsx', '--initial-old-space-size=32', path.join(ROOT, 'bench', 'engine-baseline-worker.ts')],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        MALLOC_ARENA_MAX: '2',
        ENGINE_BASELINE_DATABASE_URL: dbUrl,
        ENGINE_BASELINE_TEMPORAL_ADDRESS: ctx.dev.address,
        ENGINE_BASELINE_TASK_QUEUE: BASELINE_QUEUE,
        ENGINE_BASELINE_NAMESPACE: NAMESPACE,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  baselineWorker = worker;
  const workerExited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  const stopWorker = async () => {
    if (worker.exitCode !== null || worker.signalCode !== null) return;
    worker.kill('SIGTERM');
    if (!(await Promise.race([workerExited.then(() => true), sleep(20_000).then(() => false)]))) {
      worker.kill('SIGKILL');
      await workerExited;
    }
  };
  stops.unshift(stopWorker);
  await new Promise<void>((resolve, reject) => {
    let out = '';
    worker.stdout!.on('data', (c: Buffer) => {
      out += c.toString('utf8');
      if (out.includes('ready\n')) resolve();
    });
    worker.once('exit', (code) => reject(new Error(`the baseline worker exited (${code}) before it was ready`)));
  });
  const sampler = new TreeSampler(() => worker.pid);
  sampler.start();

  const db = new pg.Client({ connectionString: dbUrl });
  db.on('error', () => undefined);
  await db.connect();
  const client = new Client({ connection: ctx.dev.connection, namespace: NAMESPACE });
  const run = randomBytes(3).toString('hex');
  const workflowId = (i: number) => `engine-baseline-${run}-${i}`;

  const signalled = (ids: string[]) => async (i: number) => {
    await client.workflow.getHandle(ids[i]!).signal('go');
  };
  const started = (ids: string[], args: string[]) => async (i: number) => {
    await client.workflow.start(BASELINE_TYPE, { workflowId: ids[i]!, taskQueue: BASELINE_QUEUE, args: [args[i]!] });
  };
  if (WARMUP > 0) {
    // The worker's first workflows load the workflow code into its sandbox: run a few to the end first.
    log(`baseline: warm-up (${WARMUP} workflows started, signalled, completed)`);
    const args = Array.from({ length: WARMUP }, (_, i) => `${run}-warm-${i}`);
    const ids = args.map((a) => `engine-baseline-${a}`);
    const t = performance.now();
    const opts = { pollMs: POLL_MS, timeoutMs: 120_000, required: true };
    await fire(WARMUP, CLIENTS, started(ids, args));
    await reach(
      'baseline warm-up: rows',
      t,
      WARMUP,
      () => queryCount(db, 'SELECT count(*) AS n FROM baseline_instances'),
      opts,
    );
    await fire(WARMUP, CLIENTS, signalled(ids));
    await reach(
      'baseline warm-up: updated',
      t,
      WARMUP,
      () => queryCount(db, 'SELECT count(*) AS n FROM baseline_instances WHERE value IS NOT NULL'),
      opts,
    );
    await reach('baseline warm-up: Completed', t, WARMUP, counter(ctx, COMPLETED(BASELINE_TYPE)), {
      ...opts,
      required: false,
    });
    await db.query('TRUNCATE baseline_instances');
  }
  const ids = Array.from({ length: N }, (_, i) => workflowId(i));
  const args = Array.from({ length: N }, (_, i) => `${run}-${i}`);

  log(`baseline: ${N} workflows started by ${CLIENTS} concurrent starters`);
  const running0 = await counter(ctx, RUNNING(BASELINE_TYPE))();
  let cpu = cpuMark();
  let t0 = performance.now();
  const [starts, waiting, temporalRunning] = await Promise.all([
    fire(N, CLIENTS, started(ids, args)),
    inPostgres('baseline: WriteLine rows', t0, () => queryCount(db, 'SELECT count(*) AS n FROM baseline_instances')),
    inTemporal(ctx, 'baseline: workflows Running', t0, RUNNING(BASELINE_TYPE), running0),
  ]);
  const startCpu = cpuOf(ctx, cpu);
  const startQuiet = await quiet(ctx, 'baseline starts', t0);
  log(
    `baseline: ${starts.perSecond} starts/s; all waiting after ${waiting.ms} ms (${waiting.perSecond}/s); Running in Temporal after ${temporalRunning.ms} ms`,
  );

  log(`baseline: ${N} signals by ${CLIENTS} concurrent signallers`);
  const completed0 = await counter(ctx, COMPLETED(BASELINE_TYPE))();
  cpu = cpuMark();
  t0 = performance.now();
  const [signals, done, temporalCompleted] = await Promise.all([
    fire(N, CLIENTS, signalled(ids)),
    inPostgres('baseline: SetVariable rows', t0, () =>
      queryCount(db, 'SELECT count(*) AS n FROM baseline_instances WHERE value = $1', [SET_VALUE]),
    ),
    inTemporal(ctx, 'baseline: workflows Completed', t0, COMPLETED(BASELINE_TYPE), completed0),
  ]);
  const resumeCpu = cpuOf(ctx, cpu);
  const resumeQuiet = await quiet(ctx, 'baseline signals', t0);
  log(
    `baseline: ${signals.perSecond} signals/s; all done after ${done.ms} ms (${done.perSecond}/s); Completed in Temporal after ${temporalCompleted.ms} ms`,
  );
  let calls: Awaited<ReturnType<typeof baselineCalls>> | null = null;
  if (CALLS) calls = await baselineCalls(ctx, db, client, run);
  await db.end();
  sampler.stop();
  await stopWorker();
  return {
    calls,
    starts,
    waiting,
    temporalRunning,
    startQuietMs: startQuiet,
    signals,
    done,
    temporalCompleted,
    resumeQuietMs: resumeQuiet,
    workerPeakRssMb: sampler.overall.nodeMb,
    cpu: { start: startCpu, resume: resumeCpu },
  };
}

/** d. CALL_N bare workflows, each one regular activity calling the endpoint, then its row written. */
async function baselineCalls(ctx: Context, db: pg.Client, client: Client, run: string) {
  await db.query('TRUNCATE baseline_instances');
  const url = `${ctx.endpoint.url}/baseline`;
  const start = (prefix: string) => async (i: number) => {
    const id = `engine-baseline-call-${run}-${prefix}-${i}`;
    await client.workflow.start(BASELINE_CALL_TYPE, { workflowId: id, taskQueue: BASELINE_QUEUE, args: [id, url] });
  };
  const rows = () => queryCount(db, 'SELECT count(*) AS n FROM baseline_instances');
  if (WARMUP > 0) {
    const t = performance.now();
    await fire(WARMUP, CLIENTS, start('warm'));
    await reach('baseline d warm-up: rows', t, WARMUP, rows, { pollMs: POLL_MS, timeoutMs: 120_000, required: true });
    await db.query('TRUNCATE baseline_instances');
  }
  log(`baseline d: ${CALL_N} workflows with one activity calling ${url}, by ${CLIENTS} concurrent starters`);
  const calls0 = ctx.endpoint.calls();
  const cpu = cpuMark();
  const t0 = performance.now();
  const [starts, done] = await Promise.all([
    fire(CALL_N, CLIENTS, start('d')),
    reach('baseline d: calls made and rows written', t0, CALL_N, rows, {
      pollMs: POLL_MS,
      timeoutMs: WAIT_MS,
      required: true,
    }),
  ]);
  const split = cpuOf(ctx, cpu);
  await quiet(ctx, 'baseline d', t0);
  const calls = ctx.endpoint.calls() - calls0;
  log(
    `baseline d: ${starts.perSecond} starts/s; all ${CALL_N} called and written after ${done.ms} ms (${done.perSecond}/s); endpoint answered ${calls}`,
  );
  return { starts, done, endpointCalls: calls, cpu: split };
}

// --- the service ----------------------------------------------------------------------------------------

let serviceProcess: ChildProcess | undefined;
let baselineWorker: ChildProcess | undefined;

async function startService(work: string, dev: BenchDevServer, stops: (() => Promise<unknown>)[]) {
  const port = await freePort();
  const pgPort = await freePort();
  const dataDir = path.join(work, 'data');
  const adminKey = `wfa_engine_${randomBytes(16).toString('hex')}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2',
    PORT: String(port),
    DATA_DIR: dataDir,
    EMBEDDED_POSTGRES_PORT: String(pgPort),
    TEMPORAL_ADDRESS: dev.address,
    TEMPORAL_NAMESPACE: NAMESPACE,
    ADMIN_API_KEY: adminKey,
    // Phase d calls a local endpoint: loopback is refused by default.
    OUTBOUND_HTTP_ALLOW_NETWORKS: '127.0.0.0/8',
  };
  // The service's own Postgres and its defaults: nothing of the caller's environment chooses them.
  for (const k of ['DATABASE_URL', 'TEMPORAL_TASK_QUEUE', 'AUTH_SIGNING_KEY', 'LOG_LEVEL']) delete env[k];
  // What `npm start` runs (package.json): MALLOC_ARENA_MAX=2 exec node --import tsx --import <WORKFLOW_VM_PRELOAD>
  // <NODE_MEMORY_FLAGS> src/main.ts; BENCH_ENGINE_NODE_ARGS replaces the flags after tsx (to weigh another setting).
  const flags = process.env.BENCH_ENGINE_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? [
    '--import',
    WORKFLOW_VM_PRELOAD.src,
    ...NODE_MEMORY_FLAGS,
  ];
  const args = ['--import', 'tsx', ...flags, 'src/main.ts'];
  const logFile = path.join(work, 'service.log');
  const out = createWriteStream(logFile);
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  serviceProcess = child;
  child.stdout!.pipe(out);
  child.stderr!.pipe(out);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  stops.unshift(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      if (!(await Promise.race([exited.then(() => true), sleep(60_000).then(() => false)]))) {
        log('the service did not stop within 60 s: SIGKILL');
        child.kill('SIGKILL');
        await exited;
      }
    }
    out.end();
  });
  const base = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 300_000; ;) {
    const ok = await fetch(`${base}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      const tail = (await readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-20).join('\n');
      throw new Error(`the service did not become healthy:\n${tail}`);
    }
    await sleep(200);
  }
  const startupMs = round(performance.now() - t0);
  const password = (await readFile(passwordFileOf(postgresDataDirOf(dataDir)), 'utf8')).trim();
  return {
    base,
    adminKey,
    pid: child.pid!,
    startupMs,
    command: `MALLOC_ARENA_MAX=${env.MALLOC_ARENA_MAX} node ${args.join(' ')}`,
    pgBase: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${pgPort}`,
    logFile,
  };
}

function api(base: string, key: string) {
  return async <T = any>(method: string, p: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { authorization: `ApiKey ${key}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    }).catch((err: unknown) => {
      throw new Refused(`${method} ${p}: ${String(err)}`);
    });
    const text = await res.text();
    if (res.status === 429 || res.status === 503) throw new Refused(`${method} ${p}: HTTP ${res.status}`);
    if (res.status >= 300) throw new Error(`${method} ${p}: HTTP ${res.status} ${text.slice(0, 500)}`);
    return (text ? JSON.parse(text) : undefined) as T;
  };
}

async function runService(ctx: Context, svc: { base: string; adminKey: string }) {
  const call = api(svc.base, svc.adminKey);
  const db = new pg.Client({ connectionString: `${ctx.pgBase}/workflow_alterations` });
  // A stop (Ctrl-C) ends the service's Postgres under this connection: not an error of the bench.
  db.on('error', () => undefined);
  await db.connect();
  const def = await call<{ id: string; version: number }>('POST', '/workflow-definitions', ENGINE_DEFINITION);
  log(`service: definition ${DEFINITION_ID} version ${def.version} published`);

  /** A plan watched on its event stream as a user would (it ends with `done` once the plan is finished), then read. */
  const watchPlan = async (planId: string, t0: number) => {
    const res = await fetch(`${svc.base}/alterations/${planId}/events`, {
      headers: { authorization: `ApiKey ${svc.adminKey}` },
      signal: AbortSignal.timeout(WAIT_MS),
    });
    if (!res.ok) throw new Error(`plan ${planId} events: HTTP ${res.status}`);
    const text = await res.text();
    const ms = round(performance.now() - t0);
    if (!text.includes('event: done')) throw new Error(`plan ${planId}: its event stream ended without done`);
    const { plan } = await call<{
      plan: { status: number; jobCounts: Record<string, number>; outcome: string | null };
    }>('GET', `/alterations/${planId}`);
    return { ms, status: plan.status, jobCounts: plan.jobCounts, outcome: plan.outcome };
  };
  /** The plan of phase c: the SetVariable step scheduled on the definition's Running instances (created before `before`). */
  const submitScheduleSet = (definitionId: string, before?: string) =>
    call<{ planId: string }>('POST', '/alterations/submit', {
      alterations: [{ type: 'ScheduleActivity', activityId: SET_ACTIVITY }],
      filter: {
        definitionIds: [definitionId],
        statuses: ['Running'],
        ...(before ? { timestampFilters: [{ column: 'CreatedAt', operator: 'LessThan', timestamp: before }] } : {}),
      },
    });

  if (WARMUP > 0) {
    // What the worker and the API do first (loading the workflow code into the sandbox, the first plan), done
    // before the measured phases: a definition of its own, with an event of its own.
    log(`service: warm-up (${WARMUP} instances started and triggered, ${WARMUP} more and a plan over them)`);
    ctx.serviceSampler.phase('warm-up');
    const t = performance.now();
    await call('POST', '/workflow-definitions', {
      ...ENGINE_DEFINITION,
      definitionId: WARMUP_DEFINITION_ID,
      root: {
        ...ENGINE_DEFINITION.root,
        activities: ENGINE_DEFINITION.root.activities.map((a) =>
          a.id === 'wait' ? { ...a, eventName: lit(WARMUP_EVENT) } : a,
        ),
      },
    });
    const startWarm = () =>
      fire(WARMUP, CLIENTS, async () => {
        await call('POST', '/workflow-instances', { definitionId: WARMUP_DEFINITION_ID });
      });
    await startWarm();
    await call('POST', `/events/${WARMUP_EVENT}/trigger`, {});
    await startWarm();
    const { planId } = await submitScheduleSet(WARMUP_DEFINITION_ID);
    await watchPlan(planId, t);
    // Temporal catches up with the warm-up before the phases count from it.
    const opts = { pollMs: TEMPORAL_POLL_MS, timeoutMs: 120_000, required: false };
    await reach('warm-up: instance workflows', t, 2 * WARMUP, counter(ctx, `WorkflowType='${INSTANCE_TYPE}'`), opts);
    await reach('warm-up: Completed', t, WARMUP, counter(ctx, COMPLETED(INSTANCE_TYPE)), opts);
    await quiet(ctx, 'warm-up', t);
  }

  /** Counted through the API, a page of 1000 at a time (the check that the API agrees with Postgres). */
  const apiCount = async (filter: Record<string, string>) => {
    let n = 0;
    let after: string | null = null;
    do {
      const q = new URLSearchParams({ definitionId: DEFINITION_ID, limit: '1000', ...filter });
      if (after) q.set('after', after);
      const page: { items: unknown[]; nextCursor: string | null } = await call('GET', `/workflow-instances?${q}`);
      n += page.items.length;
      after = page.nextCursor;
    } while (after);
    return n;
  };
  const suspended = () =>
    queryCount(
      db,
      `SELECT count(*) AS n FROM workflow_instances
        WHERE definition_id = $1 AND status = 'Running' AND sub_status = 'Suspended'`,
      [DEFINITION_ID],
    );
  const startBatch = async (label: string, prefix: string) => {
    const ids: string[] = new Array<string>(N);
    const running0 = await counter(ctx, RUNNING(INSTANCE_TYPE))();
    ctx.serviceSampler.phase(label);
    const cpu = cpuMark();
    const t0 = performance.now();
    const [starts, waiting, temporalRunning] = await Promise.all([
      fire(N, CLIENTS, async (i) => {
        const r = await call<{ workflowInstanceId: string }>('POST', '/workflow-instances', {
          definitionId: DEFINITION_ID,
          correlationId: `${prefix}-${i}`,
        });
        ids[i] = r.workflowInstanceId;
      }),
      inPostgres(`${label}: instances Running/Suspended`, t0, suspended),
      inTemporal(ctx, `${label}: ${INSTANCE_TYPE} Running`, t0, RUNNING(INSTANCE_TYPE), running0),
    ]);
    const cpuSplitOf = cpuOf(ctx, cpu);
    const quietMs = await quiet(ctx, label, t0);
    const viaApi = await apiCount({ status: 'Running', subStatus: 'Suspended' });
    log(
      `${label}: ${starts.perSecond} accepted/s (${starts.retries} sent again); all Running/Suspended after ${waiting.ms} ms; ${INSTANCE_TYPE} Running in Temporal: ${temporalRunning.count} after ${temporalRunning.ms ?? `> ${TEMPORAL_WAIT_MS}`} ms; API lists ${viaApi}`,
    );
    return { ids, starts, waiting, temporalRunning, quietMs, apiSuspended: viaApi, cpu: cpuSplitOf };
  };

  // a. N instances, 16 clients.
  log(`service a: ${N} instances by ${CLIENTS} concurrent clients`);
  const a = await startBatch('a', 'a');

  // b. One trigger resumes them all.
  log(`service b: POST /events/${EVENT_NAME}/trigger`);
  const completed0 = await counter(ctx, COMPLETED(INSTANCE_TYPE))();
  ctx.serviceSampler.phase('b');
  let cpu = cpuMark();
  let t0 = performance.now();
  const finishedA = () =>
    queryCount(db, `SELECT count(*) AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND status = 'Finished'`, [
      a.ids,
    ]);
  const triggering = (async () => {
    const r = await call<{ resumedWorkflowInstanceIds: string[] }>('POST', `/events/${EVENT_NAME}/trigger`, {});
    return { ms: round(performance.now() - t0), resumed: r.resumedWorkflowInstanceIds.length };
  })();
  const [trigger, finished, temporalCompleted] = await Promise.all([
    triggering,
    inPostgres('b: instances Finished', t0, finishedA),
    inTemporal(ctx, `b: ${INSTANCE_TYPE} Completed`, t0, COMPLETED(INSTANCE_TYPE), completed0),
  ]);
  const bCpu = cpuOf(ctx, cpu);
  const bQuiet = await quiet(ctx, 'b', t0);
  const apiFinished = await apiCount({ status: 'Finished' });
  const setInA = await queryCount(
    db,
    `SELECT count(*) AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND (variables->>'result')::int = $2`,
    [a.ids, SET_VALUE],
  );
  log(
    `b: trigger answered in ${trigger.ms} ms (${trigger.resumed} resumed); all Finished after ${finished.ms} ms (result set on ${setInA}); ${INSTANCE_TYPE} Completed in Temporal: ${temporalCompleted.count} after ${temporalCompleted.ms ?? `> ${TEMPORAL_WAIT_MS}`} ms; API lists ${apiFinished} Finished`,
  );

  // c. A second batch, then a plan scheduling the SetVariable step on it.
  log(`service c: a second batch of ${N}, then ScheduleActivity ${SET_ACTIVITY} over it`);
  const c = await startBatch('c', 'c');
  ctx.serviceSampler.phase('c.plan');
  cpu = cpuMark();
  t0 = performance.now();
  const { planId } = await submitScheduleSet(DEFINITION_ID);
  const submitMs = round(performance.now() - t0);
  const setInC = () =>
    queryCount(
      db,
      `SELECT count(*) AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND (variables->>'result')::int = $2`,
      [c.ids, SET_VALUE],
    );
  const planDone = watchPlan(planId, t0);
  const [plan, effect] = await Promise.all([planDone, inPostgres('c: SetVariable ran (result = 42)', t0, setInC)]);
  const planCpu = cpuOf(ctx, cpu);
  const planQuiet = await quiet(ctx, 'c.plan', t0);
  const records = await queryCount(
    db,
    `SELECT count(*) AS n FROM activity_records WHERE instance_id = ANY($1::text[]) AND activity_id = $2 AND status = 'Completed'`,
    [c.ids, SET_ACTIVITY],
  ).catch(() => null);
  log(
    `c: plan ${planId} status ${plan.status} (${plan.outcome}) after ${plan.ms} ms; SetVariable ran on all ${N} after ${effect.ms} ms (${effect.perSecond}/s); its activity records Completed: ${records}`,
  );
  ctx.serviceSampler.phase(undefined);
  // Where the plan's time went, from its Temporal history (batches: queued, ran; the batch phase).
  const history = await planHistory(
    new Client({ connection: ctx.dev.connection, namespace: NAMESPACE }),
    planId,
    Math.min(loadConfig({}).alterations.window, loadConfig({}).database.batchSlots),
  ).catch((err: unknown) => {
    log(`c: the plan's history could not be read: ${String(err)}`);
    return null;
  });
  // c.burst. The same plan over the same instances (their result set back to 0, in SQL, with nothing told), right
  // after N other instances were started: its effect must not queue behind them being told to Temporal.
  const burst = BURST ? await planBehindBurst(ctx, call, db, c.ids, effect.ms ?? 0, submitScheduleSet) : null;
  const d = CALLS ? await serviceCalls(ctx, call, db) : null;
  await db.end();
  return {
    d,
    definitionVersion: def.version,
    a: {
      starts: a.starts,
      waiting: a.waiting,
      temporalRunning: a.temporalRunning,
      quietMs: a.quietMs,
      apiSuspended: a.apiSuspended,
      cpu: a.cpu,
    },
    b: { trigger, finished, setVariableDone: setInA, temporalCompleted, quietMs: bQuiet, apiFinished, cpu: bCpu },
    burst,
    c: {
      starts: c.starts,
      waiting: c.waiting,
      temporalRunning: c.temporalRunning,
      quietMs: c.quietMs,
      apiSuspended: c.apiSuspended,
      startCpu: c.cpu,
      plan: { planId, submitMs, ...plan, temporal: history },
      setVariable: effect,
      activityRecordsCompleted: records,
      quietMsAfterPlan: planQuiet,
      cpu: planCpu,
    },
  };
}

/**
 * c.burst: phase c's plan again, over phase c's instances (their `result` back to 0 in SQL, the outbox off for it),
 * submitted as soon as N other instances have been accepted (16 clients), while those are still being told to
 * Temporal. Its effect (the SetVariable step run on all N, in Postgres) against phase c's, when Temporal was idle.
 */
async function planBehindBurst(
  ctx: Context,
  call: ReturnType<typeof api>,
  db: pg.Client,
  targets: string[],
  idleMs: number,
  submit: (definitionId: string, before?: string) => Promise<{ planId: string }>,
) {
  await db.query('BEGIN');
  await db.query("SET LOCAL wfa.outbox = 'off'");
  await db.query(`UPDATE workflow_instances SET variables = variables || '{"result": 0}' WHERE id = ANY($1::text[])`, [
    targets,
  ]);
  await db.query('COMMIT');
  await quiet(ctx, 'c.burst: reset', performance.now());
  const before = new Date().toISOString();
  log(`service c.burst: ${N} more instances by ${CLIENTS} clients, then phase c's plan again over phase c's`);
  ctx.serviceSampler.phase('c.burst');
  const tBurst = performance.now();
  const starts = await fire(N, CLIENTS, async (i) => {
    await call('POST', '/workflow-instances', { definitionId: DEFINITION_ID, correlationId: `burst-${i}` });
  });
  const outbox = await queryCount(db, 'SELECT count(*) AS n FROM instance_outbox');
  // Where the machine's time goes from the plan's submission to its effect.
  const cpu = cpuMark();
  const t0 = performance.now();
  const { planId } = await submit(DEFINITION_ID, before);
  const setIn = () =>
    queryCount(
      db,
      `SELECT count(*) AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND (variables->>'result')::int = $2`,
      [targets, SET_VALUE],
    );
  const effect = await inPostgres('c.burst: SetVariable ran (result = 42)', t0, setIn);
  const cpuSplit = cpuOf(ctx, cpu);
  // When it started (its jobs made), from its submission, by the service's clock.
  const viewed = await call<{ plan: { createdAt: string; startedAt: string | null } }>('GET', `/alterations/${planId}`);
  const startedMs = viewed.plan.startedAt
    ? Date.parse(viewed.plan.startedAt) - Date.parse(viewed.plan.createdAt)
    : null;
  const history = await planHistory(
    new Client({ connection: ctx.dev.connection, namespace: NAMESPACE }),
    planId,
    Math.min(loadConfig({}).alterations.window, loadConfig({}).database.batchSlots),
  ).catch(() => null);
  ctx.serviceSampler.phase(undefined);
  await quiet(ctx, 'c.burst', tBurst);
  const ratio = effect.ms !== null && idleMs ? round(effect.ms / idleMs, 2) : null;
  log(
    `c.burst: ${starts.perSecond} accepted/s; plan submitted with ${outbox} outbox rows waiting, started ${startedMs} ms after; SetVariable ran on all ${N} after ${effect.ms} ms (${effect.perSecond}/s), ${ratio}x phase c's ${idleMs} ms`,
  );
  return {
    starts,
    outboxAtSubmit: outbox,
    planId,
    startedMs,
    setVariable: effect,
    idleMs,
    ratio,
    cpu: cpuSplit,
    temporal: history,
  };
}

/** d. CALL_N instances whose one step is a Send HTTP Request to the endpoint, until all are Finished. */
async function serviceCalls(ctx: Context, call: ReturnType<typeof api>, db: pg.Client) {
  await call('POST', '/connection-configuration', {
    name: CALL_CONNECTION,
    connectionType: HTTP_CONNECTION_TYPE,
    connectionConfiguration: { baseUrl: ctx.endpoint.url },
  });
  await call('POST', '/workflow-definitions', {
    ...oneCallDefinition(CALL_DEFINITION_ID, CALL_CONNECTION, 'POST', '/service'),
    name: 'Engine bench: one outbound call',
  });
  const finished = () =>
    queryCount(db, `SELECT count(*) AS n FROM workflow_instances WHERE definition_id = $1 AND status = 'Finished'`, [
      CALL_DEFINITION_ID,
    ]);
  const start = async () => {
    await call('POST', '/workflow-instances', { definitionId: CALL_DEFINITION_ID });
  };
  if (WARMUP > 0) {
    const t = performance.now();
    await fire(WARMUP, CLIENTS, start);
    await reach('service d warm-up: Finished', t, WARMUP, finished, {
      pollMs: POLL_MS,
      timeoutMs: 120_000,
      required: true,
    });
    await quiet(ctx, 'service d warm-up', t);
  }
  log(`service d: ${CALL_N} instances of one Send HTTP Request step, by ${CLIENTS} concurrent clients`);
  const before = await finished();
  const calls0 = ctx.endpoint.calls();
  ctx.serviceSampler.phase('d');
  const cpu = cpuMark();
  const t0 = performance.now();
  const [starts, done] = await Promise.all([
    fire(CALL_N, CLIENTS, start),
    reach('service d: called and Finished', t0, CALL_N, async () => (await finished()) - before, {
      pollMs: POLL_MS,
      timeoutMs: WAIT_MS,
      required: true,
    }),
  ]);
  const split = cpuOf(ctx, cpu);
  await quiet(ctx, 'service d', t0);
  ctx.serviceSampler.phase(undefined);
  const calls = ctx.endpoint.calls() - calls0;
  const faulted = await queryCount(
    db,
    `SELECT count(*) AS n FROM workflow_instances WHERE definition_id = $1 AND sub_status = 'Faulted'`,
    [CALL_DEFINITION_ID],
  );
  log(
    `service d: ${starts.perSecond} accepted/s; all ${CALL_N} called and Finished after ${done.ms} ms (${done.perSecond}/s); endpoint answered ${calls}; faulted ${faulted}`,
  );
  return { starts, done, endpointCalls: calls, faulted, cpu: split };
}

// ---------------------------------------------------------------------------------------------------

/** HEAD, and the last commit that changed the engine (src/, workflows/, activities/). */
function commit(): string {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
    const head = git('rev-parse', '--short', 'HEAD');
    const engine = git('log', '-1', '--format=%h', '--', 'src', 'workflows', 'activities');
    const hash = engine === head ? head : `${head} (engine last changed in ${engine})`;
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'workflows', 'activities'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
    return dirty ? `${hash} (with uncommitted changes in src/, workflows/ or activities/)` : hash;
  } catch {
    return '?';
  }
}

const ratio = (x: number | null | undefined, y: number | null | undefined) =>
  x != null && y != null && y > 0 ? round(x / y, 2) : null;

async function main(): Promise<void> {
  const config = loadConfig({ ...process.env, DATABASE_URL: undefined, TEMPORAL_ADDRESS: undefined });
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-engine-bench-'));
  // As root, the service's embedded Postgres runs as the postgres user, which must be able to enter DATA_DIR.
  await chmod(work, 0o711);
  const stops: (() => Promise<unknown>)[] = [];
  if (!KEEP) stops.push(() => rm(work, { recursive: true, force: true }));
  let stopping: Promise<void> | undefined;
  const stopAll = () =>
    (stopping ??= (async () => {
      for (const stop of stops) await stop().catch((err: unknown) => log(`error while stopping: ${String(err)}`));
    })());
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping what the bench started`);
      void stopAll().finally(() => process.exit(130));
    });
  }
  try {
    const cli = await temporalCli(config.cacheDir);
    const dev = await startBenchDevServer({
      binary: cli,
      mode: MODE,
      dir: work,
      port: await freePort(),
      namespace: NAMESPACE,
    });
    stops.unshift(() => dev.stop());
    log(`Temporal dev server ${dev.address} (pid ${dev.pid}), SQLite: ${MODE}`);

    const serviceSampler = new TreeSampler(() => serviceProcess?.pid);
    serviceSampler.start();
    serviceSampler.phase('start-up');
    stops.unshift(async () => serviceSampler.stop());
    const svc = await startService(work, dev, stops);
    log(`service pid ${svc.pid} on ${svc.base}, healthy after ${svc.startupMs} ms (${svc.command})`);
    // The endpoint phase d calls (both sides), answering 200 at once and counting what it answered.
    let endpointCalls = 0;
    const endpoint = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        endpointCalls++;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
    });
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
    stops.unshift(() => new Promise<void>((resolve) => endpoint.close(() => resolve())));
    const ctx: Context = {
      endpoint: { url: `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}`, calls: () => endpointCalls },
      work,
      cli,
      dev,
      pgBase: svc.pgBase,
      serviceSampler,
      groups: () => ({
        service: serviceProcess?.pid,
        temporal: dev.pid,
        baselineWorker: baselineWorker?.exitCode === null ? baselineWorker.pid : undefined,
        bench: process.pid,
      }),
    };

    // Where the node process's memory is, by phase (its own /metrics, every second).
    const heap = new HeapSampler(svc.base, svc.adminKey);
    heap.start();
    stops.unshift(async () => heap.stop());
    serviceSampler.onPhase = (label) => heap.phase(label);
    serviceSampler.phase('idle during the baseline');
    const baseline = await runBaseline(ctx, stops);
    const service = await runService(ctx, svc);
    // What the service logged above info (a failing relay or step shows here).
    const logged = (await readFile(svc.logFile, 'utf8').catch(() => ''))
      .split('\n')
      .map((line) => /"level":(\d+).*?"msg":"([^"]*)"/.exec(line))
      .filter((m): m is RegExpExecArray => m !== null && Number(m[1]) >= 40);
    const serviceLog = {
      warnings: logged.filter((m) => m[1] === '40').length,
      errors: logged.filter((m) => Number(m[1]) >= 50).length,
      messages: [...new Set(logged.map((m) => m[2]!))].slice(0, 10),
    };
    const finalCounts = {
      instanceExecution: await counter(ctx, `WorkflowType='${INSTANCE_TYPE}'`)(),
      running: await counter(ctx, `WorkflowType='${INSTANCE_TYPE}' AND ExecutionStatus='Running'`)(),
      completed: await counter(ctx, `WorkflowType='${INSTANCE_TYPE}' AND ExecutionStatus='Completed'`)(),
    };

    const measured = ['a', 'b', 'c', 'c.plan'].map((p) => serviceSampler.byPhase.get(p)).filter((p) => p !== undefined);
    const memory = {
      /** Peak of the service's node process RSS during phases a–c: the target's figure. */
      peakNodeMb: Math.max(0, ...measured.map((p) => p.nodeMb)),
      peakPostgresPssMb: Math.max(0, ...measured.map((p) => p.postgresPssMb)),
      peakPostgresRssMb: Math.max(0, ...measured.map((p) => p.postgresRssMb)),
      peakTreeMb: Math.max(0, ...measured.map((p) => p.totalMb)),
      startupPeakNodeMb: serviceSampler.byPhase.get('start-up')?.nodeMb ?? null,
      overallPeakNodeMb: serviceSampler.overall.nodeMb,
      byPhase: Object.fromEntries(serviceSampler.byPhase),
      /** The node process's split (V8 heap, external, native) at each phase's largest RSS, from its /metrics. */
      heapByPhase: Object.fromEntries(heap.byPhase),
    };

    const ratios = {
      starts: ratio(service.a.starts.perSecond, baseline.starts.perSecond),
      toWaiting: ratio(service.a.waiting.perSecond, baseline.waiting.perSecond),
      toDone: ratio(service.b.finished.perSecond, baseline.done.perSecond),
      calls: ratio(service.d?.done.perSecond, baseline.calls?.done.perSecond),
    };
    const targets = [
      {
        name: 'service starts >= 0.8x baseline (accepted/s vs starts/s)',
        value: ratios.starts,
        pass: (ratios.starts ?? 0) >= 0.8,
      },
      {
        name: 'service instance runs to the wait >= 0.8x baseline (instances/s)',
        value: ratios.toWaiting,
        pass: (ratios.toWaiting ?? 0) >= 0.8,
      },
      {
        name: 'service instance runs resumed to the end >= 0.8x baseline (instances/s)',
        value: ratios.toDone,
        pass: (ratios.toDone ?? 0) >= 0.8,
      },
      ...(CALLS
        ? [
            {
              name: 'service instances with one outbound call, started to Finished >= 0.8x baseline (instances/s)',
              value: ratios.calls,
              pass: (ratios.calls ?? 0) >= 0.8,
            },
          ]
        : []),
      { name: 'trigger answers < 1 s (ms)', value: service.b.trigger.ms, pass: service.b.trigger.ms < 1000 },
      {
        name: 'ScheduleActivity plan takes effect >= 5,000 instances/s',
        value: service.c.setVariable.perSecond,
        pass: (service.c.setVariable.perSecond ?? 0) >= 5000,
      },
      ...(service.burst
        ? [
            {
              name: 'ScheduleActivity plan right after N starts <= 1.25x the plan when Temporal is idle',
              value: service.burst.ratio,
              pass: service.burst.ratio !== null && service.burst.ratio <= 1.25,
            },
          ]
        : []),
      {
        name: 'peak RSS <= 300 MB (service node process, phases a-c)',
        value: memory.peakNodeMb,
        pass: memory.peakNodeMb <= 300,
      },
    ];

    const report = {
      date: new Date().toISOString(),
      commit: commit(),
      command: `BENCH_ENGINE_N=${N} BENCH_ENGINE_DEVSERVER=${MODE}${CALLS ? (CALL_N !== N ? ` BENCH_ENGINE_CALL_N=${CALL_N}` : '') : ' BENCH_ENGINE_CALLS=0'} npm run bench:engine`,
      machine: machine(),
      settings: {
        n: N,
        callN: CALLS ? CALL_N : null,
        clients: CLIENTS,
        pollMs: POLL_MS,
        devServer: { mode: MODE, binary: dev.binary, args: dev.args },
        service: { command: svc.command, startupMs: svc.startupMs },
        measuredBy:
          'Postgres read directly (counts by status, the variable value) every pollMs; the API list checked once per phase; Temporal by `temporal workflow count` every 250 ms',
      },
      baseline,
      service,
      memory,
      temporalAtEnd: finalCounts,
      serviceLog,
      ratios,
      targets,
    };
    await mkdir(path.dirname(RESULTS_FILE), { recursive: true });
    await writeFile(RESULTS_FILE, JSON.stringify(report, null, 2) + '\n');
    printTable(report);
    log(`results: ${RESULTS_FILE}`);
  } finally {
    await stopAll();
  }
}

// ---------------------------------------------------------------------------------------------------
// The table

const s = (ms: number | null | undefined) => (ms == null ? 'not reached' : `${round(ms / 1000, 2)} s`);
const rate = (r: number | null | undefined) => (r == null ? '-' : `${Math.round(r).toLocaleString('en-US')}/s`);
const x = (r: number | null) => (r == null ? '-' : `${r}x`);

/** The node process's memory at each phase's largest RSS, as its /metrics split it. */
function heapLines(byPhase: Record<string, HeapSample> | undefined): string[] {
  const phases = Object.entries(byPhase ?? {});
  if (phases.length === 0) return [];
  return [
    "Service node memory at each phase's largest RSS (MB; /metrics): RSS = V8 heap total (used) + external + native",
    ...phases.map(
      ([label, h]) =>
        `  ${label.padEnd(25)} ${h.rssMb} = ${h.heapTotalMb} (${h.heapUsedMb}) + ${h.externalMb} + ${h.nativeMb}`,
    ),
  ];
}

function printTable(r: any): void {
  const b = r.baseline;
  const v = r.service;
  const rows: [string, string, string, string][] = [];
  const row = (label: string, base: string, service: string, ratioText = '') =>
    rows.push([label, base, service, ratioText]);
  row('', 'baseline (bare Temporal)', 'service', 'service/baseline');
  row(
    `starts accepted (${CLIENTS} clients)`,
    `${s(b.starts.ms)}  ${rate(b.starts.perSecond)}`,
    `${s(v.a.starts.ms)}  ${rate(v.a.starts.perSecond)}`,
    x(r.ratios.starts),
  );
  row(
    '  request p50 / p95 / max',
    `${b.starts.latency.medianMs} / ${b.starts.latency.p95Ms} / ${b.starts.latency.maxMs} ms`,
    `${v.a.starts.latency.medianMs} / ${v.a.starts.latency.p95Ms} / ${v.a.starts.latency.maxMs} ms`,
  );
  row(
    'all N waiting (signal / event)',
    `${s(b.waiting.ms)}  ${rate(b.waiting.perSecond)}`,
    `${s(v.a.waiting.ms)}  ${rate(v.a.waiting.perSecond)}`,
    x(r.ratios.toWaiting),
  );
  row(
    '  Temporal: N workflows Running',
    `${s(b.temporalRunning.ms)} (${b.temporalRunning.count})`,
    `${s(v.a.temporalRunning.ms)} (${v.a.temporalRunning.count})`,
  );
  row('  quiet again (all but the bench)', s(b.startQuietMs), s(v.a.quietMs));
  row(
    'resume: N signals / one trigger',
    `${s(b.signals.ms)}  ${rate(b.signals.perSecond)}`,
    `${v.b.trigger.ms} ms (${v.b.trigger.resumed} resumed)`,
  );
  row(
    'all N done (row updated / Finished)',
    `${s(b.done.ms)}  ${rate(b.done.perSecond)}`,
    `${s(v.b.finished.ms)}  ${rate(v.b.finished.perSecond)}`,
    x(r.ratios.toDone),
  );
  row(
    '  Temporal: N workflows Completed',
    `${s(b.temporalCompleted.ms)} (${b.temporalCompleted.count})`,
    `${s(v.b.temporalCompleted.ms)} (${v.b.temporalCompleted.count})`,
  );
  row('  quiet again', s(b.resumeQuietMs), s(v.b.quietMs));
  row('second batch: starts accepted', '', `${s(v.c.starts.ms)}  ${rate(v.c.starts.perSecond)}`);
  row('  all N waiting', '', `${s(v.c.waiting.ms)}  ${rate(v.c.waiting.perSecond)}`);
  row('  Temporal: N Running', '', `${s(v.c.temporalRunning.ms)} (${v.c.temporalRunning.count})`);
  row('  quiet again', '', s(v.c.quietMs));
  row('plan ScheduleActivity set: submit', '', `${v.c.plan.submitMs} ms`);
  row('  plan Completed', '', `${s(v.c.plan.ms)} (status ${v.c.plan.status}, ${v.c.plan.outcome})`);
  const h = v.c.plan.temporal;
  if (h)
    row(
      '  its batches: n, queued / ran (median)',
      '',
      `${h.batchStartToClose.n}, ${h.batchScheduleToStart.medianMs} / ${h.batchStartToClose.medianMs} ms; batch phase ${s(h.batchPhaseMs)}`,
    );
  row('  SetVariable ran on all N', '', `${s(v.c.setVariable.ms)}  ${rate(v.c.setVariable.perSecond)}`);
  row('  quiet again', '', s(v.c.quietMsAfterPlan));
  if (v.burst) {
    row('c.burst: N more starts accepted', '', `${s(v.burst.starts.ms)}  ${rate(v.burst.starts.perSecond)}`);
    row(
      '  the same plan: SetVariable on all N',
      '',
      `${s(v.burst.setVariable.ms)}  ${rate(v.burst.setVariable.perSecond)}`,
      v.burst.ratio === null ? '' : `${v.burst.ratio}x idle`,
    );
    row('  outbox rows waiting at its submit', '', String(v.burst.outboxAtSubmit));
    const bh = v.burst.temporal;
    if (bh)
      row(
        '  its batches: n, queued / ran (median)',
        '',
        `${bh.batchStartToClose.n}, ${bh.batchScheduleToStart.medianMs} / ${bh.batchStartToClose.medianMs} ms; batch phase ${s(bh.batchPhaseMs)}`,
      );
  }
  if (v.d && b.calls) {
    row(
      `d. one outbound call: ${r.settings.callN} started`,
      `${s(b.calls.starts.ms)}  ${rate(b.calls.starts.perSecond)}`,
      `${s(v.d.starts.ms)}  ${rate(v.d.starts.perSecond)}`,
    );
    row(
      '  all called and done (row / Finished)',
      `${s(b.calls.done.ms)}  ${rate(b.calls.done.perSecond)}`,
      `${s(v.d.done.ms)}  ${rate(v.d.done.perSecond)}`,
      x(r.ratios.calls),
    );
    row(
      '  calls the endpoint answered',
      String(b.calls.endpointCalls),
      `${v.d.endpointCalls} (faulted ${v.d.faulted})`,
    );
  }
  row('peak RSS, phases a-c: node', `${b.workerPeakRssMb} MB (worker)`, `${r.memory.peakNodeMb} MB`);
  row('  postgres (PSS) / service tree', '', `${r.memory.peakPostgresPssMb} MB / ${r.memory.peakTreeMb} MB`);
  const phasePeaks = Object.entries(r.memory.byPhase as Record<string, { nodeMb: number }>)
    .map(([phase, p]) => `${phase} ${Math.round(p.nodeMb)}`)
    .join(', ');
  const cpuText = (c: CpuSplit) =>
    `${Object.entries(c.percent)
      .filter(([, p]) => p >= 1)
      .map(([k, p]) => `${k} ${Math.round(p)}%`)
      .join(', ')}; others ${c.othersPercent == null ? '?' : Math.round(c.othersPercent)}%`;
  const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((rr) => rr[i]!.length)));
  const lines = [
    '',
    `Engine bench: N = ${r.settings.n}, ${CLIENTS} clients, dev server SQLite ${r.settings.devServer.mode}, commit ${r.commit}`,
    `${r.machine.cpus} cores (${r.machine.cpuModel}), Node ${r.machine.node}`,
    '',
    ...rows.map((rr) => rr.map((c, i) => (i === 0 ? c.padEnd(widths[0]!) : c.padStart(widths[i]!))).join('   ')),
    '',
    `Service node RSS peak by phase (MB): ${phasePeaks}`,
    ...heapLines(r.memory.heapByPhase),
    '',
    'CPU (% of one core):',
    `  baseline starts:  ${cpuText(b.cpu.start)}`,
    `  baseline signals: ${cpuText(b.cpu.resume)}`,
    `  service a:        ${cpuText(v.a.cpu)}`,
    `  service b:        ${cpuText(v.b.cpu)}`,
    `  service c starts: ${cpuText(v.c.startCpu)}`,
    `  service c plan:   ${cpuText(v.c.cpu)}`,
    '',
    `Temporal at the end: ${r.temporalAtEnd.instanceExecution} ${INSTANCE_TYPE} executions (${r.temporalAtEnd.running} Running, ${r.temporalAtEnd.completed} Completed)`,
    `Service log: ${r.serviceLog.warnings} warnings, ${r.serviceLog.errors} errors${r.serviceLog.messages.length ? ` (${r.serviceLog.messages.join('; ')})` : ''}`,
    `API check: a ${v.a.apiSuspended} Running/Suspended, b ${v.b.apiFinished} Finished, c ${v.c.apiSuspended} Running/Suspended; SetVariable activity records Completed in c: ${v.c.activityRecordsCompleted}`,
    '',
    'Targets (reported, not enforced):',
    ...r.targets.map(
      (t: { name: string; value: unknown; pass: boolean }) => `  ${t.pass ? 'PASS' : 'FAIL'}  ${t.name}: ${t.value}`,
    ),
    '',
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`engine bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
