/**
 * Noisy neighbour benchmark: `npm run bench:noisy`.
 *
 * The service runs as its own process (`tsx src/main.ts`, API and worker, as `npm start` runs it) on an
 * embedded Postgres and a Temporal dev server (Task Queue Fairness on) that this script starts; the script
 * is the tenants' clients, over HTTP, and an endpoint that never answers. Measured:
 *   tenant B's plan (one ModifyVariable over NOISY_B instances, default 10,000) alone, NOISY_RUNS times;
 *   then, while tenant A runs a plan over NOISY_A instances (default 100,000) and has NOISY_CALLS (60)
 *   instances calling the endpoint that never answers, B's same plan again, NOISY_RUNS times, each started once
 *   A's plan has done NOISY_A_HEAD (a fifth) of its jobs, and whether A's plan still ran at B's end;
 *   B's time ratio (median noisy / median alone; target ≤ 1.5x), `/health` latency (p50, p99, max) in both
 *   phases, probed every 100 ms, and how many of A's calls the endpoint held at once (its share: 5).
 * Then the node's time (contract section 8): tenant B's cheap reads (definitions, a page of 20 instances, a
 * count, a page of plans), alone for NOISY_API_MS and then beside each flood, NOISY_API_RUNS times (5):
 * tenant C reading pages of 1,000 instances 32 at a time, tenant A's 64 parallel cheap reads, and anonymous
 * floods (64 connections) of `/health/live`, of unknown API keys and of `/health/ready`; each flood from a
 * process of its own (test/support/flood.ts). Target: B's median beside ≤ 1.5x its median alone, in every
 * run. NOISY_PHASES=api runs this phase only; NOISY_PHASES=plans the plan phases only; NOISY_PHASES=burst the
 * plan behind another tenant's burst of starts (`planBehindBurst`), which the default runs between the two.
 * Results: a table on stdout and bench/results/noisy-latest.json (NOISY_RESULTS_FILE).
 *
 * This file starts and stops what the run needs and seeds both tenants; the phases are in bench/noisy/.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@temporalio/client';
import pg from 'pg';
import { loadConfig } from '../src/config.js';
import { startEmbeddedPostgres } from '../src/embedded/postgres.js';
import { createLogger } from '../src/logger.js';
import { startDevServer } from '../src/temporal/devserver.js';
import { installTemporalRuntime } from '../src/temporal/runtime.js';
import { freePort } from '../test/support/free-port.js';
import { planBehindBurst } from './noisy/burst.js';
import { apiFloods } from './noisy/floods.js';
import { tenantPlans } from './noisy/plans.js';
import { caller, startService } from './noisy/service.js';
import { A_SIZE, B_SIZE, FRESH_PAGES, log, PHASES, RESULTS_FILE, SEED_SQL } from './noisy/settings.js';
import { DEFINITION } from './size/settings.js';
import { dbUrl, recreateDatabase, round, seedWithoutWorkflows } from './util.js';

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger('warn');
  await installTemporalRuntime(logger);
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-noisy-'));
  const stops: (() => Promise<unknown>)[] = [() => rm(work, { recursive: true, force: true })];
  const held: ServerResponse[] = [];
  let heldNow = 0;
  let heldMax = 0;
  const endpoint = createServer((req, res) => {
    req.resume();
    heldNow++;
    heldMax = Math.max(heldMax, heldNow);
    res.on('close', () => heldNow--);
    held.push(res);
  });
  try {
    const pgPort = Number(process.env.BENCH_PG_PORT ?? 54349);
    const postgres = await startEmbeddedPostgres({
      dataDir: path.join(os.tmpdir(), 'wfa-noisy', 'postgres'),
      port: pgPort,
      database: 'postgres',
      logger,
    });
    stops.unshift(() => postgres.stop());
    const temporal = await startDevServer({
      cliPath: config.temporal.cliPath,
      cacheDir: config.cacheDir,
      dbFilename: path.join(work, 'temporal.sqlite'),
      namespace: 'default',
      port: await freePort(),
      uiPort: 0,
    });
    stops.unshift(() => temporal.teardown());
    await recreateDatabase(postgres.adminUrl, 'wfa_noisy');
    const databaseUrl = dbUrl(postgres.adminUrl, 'wfa_noisy');
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
    stops.unshift(async () => {
      for (const r of held) r.destroy();
      await new Promise((resolve) => endpoint.close(resolve));
    });

    // The service, as its own process.
    const { service, base, adminKey } = await startService({
      work,
      databaseUrl,
      temporalAddress: temporal.address,
      stops,
    });
    log(`service pid ${service.pid} on ${base}; Postgres ${pgPort}; Temporal ${temporal.address}`);

    const call = caller(base);
    const keyOf = async (tenantId: string) =>
      (
        await call<{ key: string }>(adminKey, 'POST', '/identity/api-keys', {
          name: tenantId,
          permissions: ['*'],
          tenantId,
        })
      ).key;
    const keyA = await keyOf('tenant-a');
    const keyB = await keyOf('tenant-b');

    const seed = async (key: string, tenantId: string, n: number) => {
      const def = await call<{ id: string }>(key, 'POST', '/workflow-definitions', DEFINITION);
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      const seeded = await seedWithoutWorkflows(db, SEED_SQL, [def.id, n, tenantId]);
      if (seeded.rowCount !== n) throw new Error(`seeded ${seeded.rowCount} instances of ${tenantId}, expected ${n}`);
      await db.end();
    };
    log(`seeding ${A_SIZE} instances of tenant A and ${B_SIZE} of tenant B`);
    await seed(keyA, 'tenant-a', A_SIZE);
    await seed(keyB, 'tenant-b', B_SIZE);
    {
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      await db.query('VACUUM ANALYZE workflow_instances');
      // As bench/size.ts seeds (since 2026-11-27): both tenants' rows written once more and vacuumed, so that the
      // first plans find pages as later ones do, with room for heap-only writes (BENCH_FRESH_PAGES=1: as inserted).
      if (FRESH_PAGES === false) {
        const written = await db.query('UPDATE workflow_instances SET revision = revision');
        if (written.rowCount !== A_SIZE + B_SIZE)
          throw new Error(`wrote ${written.rowCount} instances once more, expected ${A_SIZE + B_SIZE}`);
        await db.query('VACUUM ANALYZE workflow_instances');
      }
      await db.end();
    }

    const plans = PHASES.has('plans')
      ? await tenantPlans({
          base,
          call,
          keyA,
          keyB,
          connection: temporal.connection,
          endpoint: {
            port: (endpoint.address() as AddressInfo).port,
            held: () => held.length,
            heldMax: () => heldMax,
          },
        })
      : undefined;

    const burst = PHASES.has('burst')
      ? await planBehindBurst({
          base,
          databaseUrl,
          keyA,
          keyB,
          temporal: new Client({ connection: temporal.connection }),
        })
      : undefined;
    const api = PHASES.has('api') ? await apiFloods({ base, adminKey, databaseUrl, keyA, keyB }) : undefined;

    const cpus = os.cpus();
    const report = {
      date: new Date().toISOString(),
      command: 'npm run bench:noisy',
      machine: {
        cpus: os.availableParallelism(),
        cpuModel: cpus[0]?.model ?? '?',
        memTotalGb: round(os.totalmem() / 1024 ** 3),
        node: process.version,
      },
      ...(plans ? { plans: plans.report } : {}),
      ...(burst ? { burst: burst.report } : {}),
      ...(api ? { api: api.report } : {}),
    };
    await mkdir(path.dirname(RESULTS_FILE), { recursive: true });
    await writeFile(RESULTS_FILE, JSON.stringify(report, null, 2) + '\n');
    process.stdout.write(
      [
        '',
        ...(plans?.lines ?? []),
        ...(burst?.lines ?? []),
        ...(api?.lines ?? []),
        `results: ${RESULTS_FILE}`,
        '',
      ].join('\n'),
    );
  } finally {
    for (const stop of stops) await stop().catch((err: unknown) => log(`error while stopping: ${String(err)}`));
  }
}

main().then(
  () => undefined,
  (err: unknown) => {
    process.stderr.write(`noisy bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
