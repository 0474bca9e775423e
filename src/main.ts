import path from 'node:path';
import type { serve } from '@hono/node-server';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { createApp } from './api/app.js';
import { serveApi } from './api/server.js';
import { logStaleGrants } from './auth/stale-grants.js';
import { loadSigningKey } from './auth/tokens.js';
import { ensureAdminUser } from './auth/users.js';
import { createConfigCipher } from './connections/cipher.js';
import { checkEncryptionKey } from './connections/repository.js';
import { ensureBootstrapApiKey, hashApiKey } from './auth/api-keys.js';
import { ConfigError, loadConfig } from './config.js';
import { migrate } from './db/migrate.js';
import { createPool } from './db/pool.js';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from './embedded/postgres.js';
import { DefinitionCache } from './engine/definitions.js';
import { createLogger } from './logger.js';
import { startDevServer } from './temporal/devserver.js';
import { temporalDispatcher } from './temporal/dispatch.js';
import { startPendingPlans } from './temporal/plans.js';
import { installTemporalRuntime } from './temporal/runtime.js';
import { createWorker } from './temporal/worker.js';

type Role = 'all' | 'api' | 'worker';

function roleFromArgs(argv: string[]): Role {
  if (argv.includes('--api')) return 'api';
  if (argv.includes('--worker')) return 'worker';
  return 'all';
}

/**
 * `npm start`: configuration, embedded Postgres and Temporal when none is configured, migrations, then
 * the worker and the API in one process (`--api` / `--worker` run one role, the production shape).
 */
async function main(): Promise<void> {
  const role = roleFromArgs(process.argv.slice(2));
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  installTemporalRuntime(logger);
  const stops: (() => Promise<unknown>)[] = [];

  let databaseUrl = config.databaseUrl;
  let embeddedPg: EmbeddedPostgresHandle | undefined;
  if (!databaseUrl) {
    const port = Number(process.env.EMBEDDED_POSTGRES_PORT ?? 54329);
    embeddedPg = await startEmbeddedPostgres({
      dataDir: path.join(config.dataDir, 'postgres'),
      port,
      database: 'workflow_alterations',
      logger,
    });
    databaseUrl = embeddedPg.url;
    stops.unshift(() => embeddedPg!.stop());
    logger.info({ port }, 'embedded Postgres started');
  }
  const pool = createPool(databaseUrl, 20);
  stops.unshift(() => pool.end());
  await migrate(pool, logger);

  let devServer: TestWorkflowEnvironment | undefined;
  let connection: Connection;
  let nativeConnection: NativeConnection;
  if (config.temporal.address) {
    connection = await Connection.connect({ address: config.temporal.address });
    nativeConnection = await NativeConnection.connect({ address: config.temporal.address });
    stops.unshift(() => connection.close(), () => nativeConnection.close());
  } else {
    devServer = await startDevServer({
      cliPath: config.temporal.cliPath,
      dbFilename: path.join(config.dataDir, 'temporal.sqlite'),
      namespace: config.temporal.namespace,
      port: Number(process.env.TEMPORAL_DEV_SERVER_PORT ?? 7233),
      uiPort: config.temporal.uiPort,
    });
    connection = devServer.connection;
    nativeConnection = devServer.nativeConnection;
    stops.unshift(() => devServer!.teardown());
  }
  const temporal = new Client({ connection, namespace: config.temporal.namespace });
  const definitions = new DefinitionCache();
  // A wrong or missing CONNECTIONS_ENCRYPTION_KEY stops the start here, with a message saying so.
  const cipher = createConfigCipher(config.connectionsEncryptionKey);
  await checkEncryptionKey(pool, cipher);

  let generatedKey: string | undefined;
  if (!config.adminApiKey && role !== 'worker') generatedKey = await ensureBootstrapApiKey(pool);
  if (config.adminPassword && role !== 'worker') await ensureAdminUser(pool, config.adminPassword);
  if (config.permissionModel === 'structured' && role !== 'worker') await logStaleGrants(pool, logger);
  const tokens = {
    key: await loadSigningKey(config.authSigningKey, config.dataDir),
    accessTokenLifetimeSeconds: config.accessTokenLifetimeSeconds,
    refreshTokenLifetimeSeconds: config.refreshTokenLifetimeSeconds,
  };

  let worker: Worker | undefined;
  let workerRun: Promise<void> | undefined;
  if (role !== 'api') {
    worker = await createWorker({
      connection: nativeConnection,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      deps: { pool, definitions, logger, cipher, dispatcher: temporalDispatcher(temporal, config.temporal.taskQueue) },
    });
    workerRun = worker.run();
    workerRun.catch((err: unknown) => {
      logger.fatal({ err }, 'worker stopped with an error');
      process.exitCode = 1;
    });
    await startPendingPlans(pool, temporal, { taskQueue: config.temporal.taskQueue, ...config.alterations }, logger);
  }

  let server: ReturnType<typeof serve> | undefined;
  if (role !== 'worker') {
    const app = createApp({
      config,
      pool,
      temporal,
      dispatcher: temporalDispatcher(temporal, config.temporal.taskQueue),
      definitions,
      cipher,
      logger,
      adminApiKeyHash: config.adminApiKey ? hashApiKey(config.adminApiKey) : undefined,
      tokens,
    });
    server = serveApi(app, { port: config.port });
  }

  const base = `http://localhost:${config.port}`;
  const lines = [''];
  if (server) lines.push(`  API:          ${base}`, `  API docs:     ${base}/docs  (OpenAPI: ${base}/openapi.json)`);
  if (devServer && config.temporal.uiPort > 0) lines.push(`  Temporal UI:  http://localhost:${config.temporal.uiPort}`);
  if (devServer) lines.push(`  Temporal:     ${devServer.address} (embedded dev server, data in ${config.dataDir})`);
  if (embeddedPg) lines.push(`  Postgres:     embedded, data in ${path.join(config.dataDir, 'postgres')}`);
  if (worker) lines.push(`  Worker:       task queue "${config.temporal.taskQueue}"`);
  if (generatedKey) {
    lines.push(
      '',
      '  A bootstrap admin API key was generated. It is shown this once and only its hash is stored:',
      `      Authorization: ApiKey ${generatedKey}`,
    );
  }
  lines.push('', '  Ctrl-C stops everything.', '');
  process.stdout.write(lines.join('\n') + '\n');

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    if (server) {
      const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      await closed;
    }
    if (worker) {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await workerRun?.catch(() => undefined);
    }
    // On Ctrl-C the terminal signals Postgres and the dev server too; a child that is already gone must
    // not hold up the exit, so every stop gets a deadline.
    for (const stop of stops) {
      await withDeadline(stop(), 10_000).catch((err: unknown) => logger.warn({ err }, 'error while stopping'));
    }
    logger.info('stopped');
    process.exit(process.exitCode ?? 0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

main().catch((err: unknown) => {
  const message = err instanceof ConfigError ? err.message : err instanceof Error ? `${err.message}${err.cause ? `\n  cause: ${String((err.cause as Error).message ?? err.cause)}` : ''}` : String(err);
  process.stderr.write(`Startup failed: ${message}\n`);
  process.exit(1);
});
