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
 *
 * This file starts and stops what the run needs; the settings, the measuring, both sides' phases and the
 * report are in bench/engine/.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.js';
import { freePort } from '../test/support/free-port.js';
import { startBenchDevServer, temporalCli } from './engine-devserver.js';
import { HeapSampler } from './engine-heap.js';
import { machine, TreeSampler } from './engine-procs.js';
import { runBaseline } from './engine/baseline.js';
import { benchProcesses, type Context, counter } from './engine/measure.js';
import { runService } from './engine/phases.js';
import { commit, printTable, ratiosOf, targetsOf } from './engine/report.js';
import { startService } from './engine/service.js';
import {
  CALL_N,
  CALLS,
  CLIENTS,
  INSTANCE_TYPE,
  KEEP,
  log,
  MODE,
  N,
  NAMESPACE,
  POLL_MS,
  RESULTS_FILE,
} from './engine/settings.js';

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

    const serviceSampler = new TreeSampler(() => benchProcesses.service?.pid);
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
        service: benchProcesses.service?.pid,
        temporal: dev.pid,
        baselineWorker:
          benchProcesses.baselineWorker?.exitCode === null ? benchProcesses.baselineWorker.pid : undefined,
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

    const ratios = ratiosOf(baseline, service);
    const targets = targetsOf(service, ratios, memory);

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

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`engine bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
