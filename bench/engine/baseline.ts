/**
 * The baseline: one bare Temporal workflow per instance, run by a worker process of its own on its own task
 * queue, its rows in a database of its own on the service's Postgres cluster. N starts, then N signals, then
 * (phase d) the workflows with one outbound call.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Client } from '@temporalio/client';
import pg from 'pg';
import { cpuMark, TreeSampler } from '../engine-procs.js';
import { sleep } from '../util.js';
import { baselineCalls } from './calls.js';
import {
  benchProcesses,
  COMPLETED,
  type Context,
  counter,
  cpuOf,
  fire,
  inPostgres,
  inTemporal,
  queryCount,
  quiet,
  reach,
  RUNNING,
} from './measure.js';
import {
  BASELINE_QUEUE,
  BASELINE_TYPE,
  CALLS,
  CLIENTS,
  log,
  N,
  NAMESPACE,
  POLL_MS,
  ROOT,
  SET_VALUE,
  WARMUP,
} from './settings.js';

export async function runBaseline(ctx: Context, stops: (() => Promise<unknown>)[]) {
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
  benchProcesses.baselineWorker = worker;
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
