import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { TestProject } from 'vitest/node';
import { loadConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool } from '../../src/db/pool.js';
import { ensureDatabase, startEmbeddedPostgres } from '../../src/embedded/postgres.js';
import { startDevServer } from '../../src/temporal/devserver.js';
import { slimWorkflowBundle, WORKFLOW_INTERCEPTORS_PATH, WORKFLOWS_PATH } from '../../src/temporal/worker.js';
import { freePort } from './free-port.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Maintenance-database URL of the test Postgres server (CREATE DATABASE rights). */
    pgAdminUrl: string;
    /** Migrated template every test file clones its own database from. */
    templateDatabase: string;
    temporalAddress: string;
    workflowBundlePath: string;
  }
}

/**
 * Starts what every test file shares: one real Postgres (DATABASE_URL's server, or an embedded one) with a
 * migrated template database, one real Temporal (TEMPORAL_ADDRESS, or a dev server), and one workflow
 * bundle, so each file only clones a database and starts a worker on its own task queue.
 */
export default async function setup(project: TestProject) {
  // Private (mkdtemp); as root, startEmbeddedPostgres lets the `postgres` user enter it.
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-test-'));
  const stops: (() => Promise<unknown>)[] = [];

  // The same settings the service reads: DATABASE_URL, TEMPORAL_ADDRESS, TEMPORAL_CLI_PATH.
  const config = loadConfig();
  let adminUrl: string;
  if (config.databaseUrl) {
    const url = new URL(config.databaseUrl);
    url.pathname = '/postgres';
    adminUrl = url.toString();
  } else {
    const pg = await startEmbeddedPostgres({
      dataDir: path.join(work, 'postgres'),
      port: await freePort(),
      database: 'postgres',
      persistent: false,
    });
    adminUrl = pg.adminUrl;
    stops.push(() => pg.stop());
  }
  const templateDatabase = `wfa_template_${process.pid}`;
  await ensureDatabase(adminUrl, templateDatabase);
  const templateUrl = new URL(adminUrl);
  templateUrl.pathname = `/${templateDatabase}`;
  const pool = createPool(templateUrl.toString(), 2);
  await migrate(pool);
  await pool.end();

  let temporalAddress = config.temporal.address;
  if (!temporalAddress) {
    const env = await startDevServer({
      cliPath: config.temporal.cliPath,
      cacheDir: config.cacheDir,
      namespace: 'default',
    });
    temporalAddress = env.address;
    stops.unshift(() => env.teardown());
  }

  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: [WORKFLOW_INTERCEPTORS_PATH],
    logger: quietLogger,
  });
  const workflowBundlePath = path.join(work, 'workflow-bundle.js');
  await writeFile(workflowBundlePath, slimWorkflowBundle(code));

  project.provide('pgAdminUrl', adminUrl);
  project.provide('templateDatabase', templateDatabase);
  project.provide('temporalAddress', temporalAddress);
  project.provide('workflowBundlePath', workflowBundlePath);

  return async () => {
    for (const stop of stops) await stop().catch(() => undefined);
    await rm(work, { recursive: true, force: true }).catch(() => undefined);
  };
}

const noop = () => undefined;
const quietLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: console.error, log: noop };
