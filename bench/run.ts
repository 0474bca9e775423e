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
const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
const RESULTS_FILE = process.env.BENCH_RESULTS_FILE ?? path.join(BENCH_DIR, 'results', 'latest.json');
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import pg from 'pg';
import { loadConfig } from '../src/config.js';
import { type EmbeddedPostgresHandle, startEmbeddedPostgres } from '../src/embedded/postgres.js';
import { createLogger } from '../src/logger.js';
import { NODE_MEMORY_FLAGS } from '../src/memory.js';
import { startDevServer } from '../src/temporal/devserver.js';
import { installTemporalRuntime } from '../src/temporal/runtime.js';
import { slimWorkflowBundle, WORKFLOW_INTERCEPTORS_PATH, WORKFLOWS_PATH } from '../src/temporal/worker.js';
import { type BenchResults, evaluateTargets, printTable, type SizeResult } from './report.js';
import { child } from './size.js';
import { POLL_MS, WAIT_VIA } from './size/settings.js';
import { redactUrl, round } from './util.js';

// ---------------------------------------------------------------------------------------------------
// The parent: shared infrastructure, one child per size, the report

function parseSizes(): number[] {
  const sizes = (process.env.BENCH_SIZES ?? '10000,100000')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map(Number);
  if (sizes.length === 0 || sizes.some((s) => !Number.isInteger(s) || s < 1)) {
    throw new Error(
      `BENCH_SIZES must be a comma-separated list of positive integers, not "${process.env.BENCH_SIZES}"`,
    );
  }
  return sizes;
}

/** BENCH_NODE_ARGS: extra node flags for the measured process, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`. */
function childNodeArgs(): string[] {
  return (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
}

function runChild(size: number, env: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    // --expose-gc: only to read the live heap after a full GC once the plan is done (it changes nothing else).
    const proc = spawn(
      process.execPath,
      [...process.execArgv, ...NODE_MEMORY_FLAGS, '--expose-gc', ...childNodeArgs(), fileURLToPath(import.meta.url)],
      {
        // MALLOC_ARENA_MAX and NODE_MEMORY_FLAGS as the npm scripts and the Dockerfile set them for the service.
        env: { MALLOC_ARENA_MAX: '2', ...process.env, ...env, BENCH_CHILD_SIZE: String(size) },
        stdio: 'inherit',
      },
    );
    proc.on('error', reject);
    proc.on('exit', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`size ${size}: child exited with ${signal ?? `code ${code}`}`)),
    );
  });
}

async function parent(): Promise<void> {
  const sizes = parseSizes();
  const config = loadConfig();
  const logger = createLogger('warn');
  await installTemporalRuntime(logger);
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
      const dataDir = path.join(os.tmpdir(), 'wfa-bench', 'postgres');
      const handle: EmbeddedPostgresHandle = await startEmbeddedPostgres({
        dataDir,
        port,
        database: 'postgres',
        logger,
      });
      stops.unshift(() => handle.stop());
      adminUrl = handle.adminUrl;
      pgDescription = `embedded, port ${port}, data in ${dataDir}`;
      const version = new pg.Client({ connectionString: adminUrl });
      await version.connect();
      const { rows } = await version
        .query<{ v: string }>("SELECT current_setting('server_version') AS v")
        .catch(() => ({ rows: [{ v: '?' }] }));
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
        cacheDir: config.cacheDir,
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

    const { code } = await bundleWorkflowCode({
      workflowsPath: WORKFLOWS_PATH,
      workflowInterceptorModules: [WORKFLOW_INTERCEPTORS_PATH],
      logger: quietBundleLogger,
    });
    const bundle = path.join(work, 'workflow-bundle.js');
    await writeFile(bundle, slimWorkflowBundle(code));

    // BENCH_ONLY=dry-run: each size seeds and measures its dry-run only (bench/size.ts runDryRunOnly).
    if (process.env.BENCH_ONLY === 'dry-run') {
      const figures: unknown[] = [];
      for (const size of sizes) {
        const resultFile = path.join(work, `dry-run-${size}.json`);
        await runChild(size, {
          BENCH_PG_ADMIN_URL: adminUrl,
          BENCH_TEMPORAL_ADDRESS: address,
          BENCH_WORKFLOW_BUNDLE: bundle,
          BENCH_RESULT_FILE: resultFile,
        });
        figures.push(JSON.parse(await readFile(resultFile, 'utf8')));
      }
      const out = {
        date: new Date().toISOString(),
        command: `BENCH_ONLY=dry-run BENCH_SIZES=${sizes.join(',')} npm run bench`,
        cpus: os.availableParallelism(),
        sizes: figures,
      };
      await mkdir(path.dirname(RESULTS_FILE), { recursive: true });
      await writeFile(RESULTS_FILE, JSON.stringify(out, null, 2) + '\n');
      log(`dry-run figures: ${RESULTS_FILE}`);
      return;
    }
    const results: SizeResult[] = [];
    // BENCH_COMPARE_UNDO=1: each size also runs with no before-images recorded, to show what they cost.
    const variants = process.env.BENCH_COMPARE_UNDO === '1' ? ['1', '0'] : ['1'];
    for (const size of sizes) {
      for (const recordUndo of variants) {
        log(`N = ${size}${recordUndo === '0' ? ' without before-images' : ''}: starting a fresh process and database`);
        const resultFile = path.join(work, `result-${size}-${recordUndo}.json`);
        await runChild(size, {
          BENCH_PG_ADMIN_URL: adminUrl,
          BENCH_TEMPORAL_ADDRESS: address,
          BENCH_WORKFLOW_BUNDLE: bundle,
          BENCH_RESULT_FILE: resultFile,
          BENCH_RECORD_UNDO: recordUndo,
        });
        results.push(JSON.parse(await readFile(resultFile, 'utf8')) as SizeResult);
      }
    }

    const cpus = os.cpus();
    const report: BenchResults = {
      date: new Date().toISOString(),
      command: `${process.env.BENCH_COMPARE_UNDO === '1' ? 'BENCH_COMPARE_UNDO=1 ' : ''}BENCH_SIZES=${sizes.join(',')} npm run bench`,
      machine: {
        cpus: os.availableParallelism(),
        cpuModel: cpus[0]?.model ?? '?',
        memTotalGb: round(os.totalmem() / 1024 ** 3),
        node: process.version,
        platform: `${os.platform()} ${os.release()}`,
      },
      config: {
        ...config.alterations,
        pollMs: POLL_MS,
        waitVia: WAIT_VIA,
        postgres: pgDescription,
        temporal: temporalDescription,
      },
      sizes: results,
      targets: evaluateTargets(results.filter((r) => r.recordUndo !== false)),
    };
    await mkdir(path.dirname(RESULTS_FILE), { recursive: true });
    await writeFile(RESULTS_FILE, JSON.stringify(report, null, 2) + '\n');
    printTable(report, RESULTS_FILE);
    // BENCH_MAX_RATIO (CI): fail when a plan regressed past this many times its raw UPDATE floor.
    const maxRatio = process.env.BENCH_MAX_RATIO ? Number(process.env.BENCH_MAX_RATIO) : undefined;
    if (maxRatio !== undefined) {
      const checked = results.filter((r) => r.recordUndo !== false);
      const over = checked.filter((r) => !(r.ratio <= maxRatio) || !r.plan.verified.ok);
      for (const r of checked)
        log(`${over.includes(r) ? 'FAIL' : 'PASS'}  N=${r.n}: plan / raw UPDATE ${r.ratio}x (bound ${maxRatio}x)`);
      process.stdout.write(`bench: ${checked.length - over.length} passed, ${over.length} failed\n`);
      if (over.length) process.exitCode = 1;
    }
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
    if (err instanceof Error && err.cause)
      process.stderr.write(`  cause: ${String((err.cause as Error).message ?? err.cause)}\n`);
    process.exit(1);
  },
);
