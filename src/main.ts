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
import { type Config, ConfigError, loadConfig } from './config.js';
import { migrate } from './db/migrate.js';
import { createPool } from './db/pool.js';
import { prepareDataDir } from './embedded/data-dir.js';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from './embedded/postgres.js';
import { DefinitionCache } from './engine/definitions.js';
import { Lifecycle, StopRequested } from './lifecycle.js';
import { createLogger, type Logger } from './logger.js';
import { assertPortsFree, PortInUseError, type PortUse } from './ports.js';
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
 * The process's end belongs to `Lifecycle`: SIGINT/SIGTERM, a fatal worker error or a failed start stop
 * what was started, in order, and leave no child behind.
 */
async function main(): Promise<void> {
  const role = roleFromArgs(process.argv.slice(2));
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`Startup failed: ${describe(err)}\n`);
    process.exit(1);
  }
  const logger = createLogger(config.logLevel);
  const life = new Lifecycle(logger);
  process.on('SIGINT', () => life.request('SIGINT', 0));
  process.on('SIGTERM', () => life.request('SIGTERM', 0));
  // A bug that escapes every handler stops the service in order (exit 1) instead of killing the process
  // and leaving its Postgres running.
  const fatal = (what: string) => (err: unknown) => {
    logger.fatal({ err }, what);
    life.request(what, 1);
  };
  process.on('uncaughtException', fatal('uncaught exception'));
  process.on('unhandledRejection', fatal('unhandled rejection'));
  try {
    await start(role, config, logger, life);
    life.started();
  } catch (err) {
    if (!(err instanceof StopRequested)) process.stderr.write(`Startup failed: ${describe(err)}\n`);
    await life.stop();
  }
}

async function start(role: Role, config: Config, logger: Logger, life: Lifecycle): Promise<void> {
  // Before anything is printed, generated or started: a taken port is one message naming it.
  await assertPortsFree(portsOf(role, config));
  // Whatever this process and its children (Temporal's SQLite, Postgres) create in DATA_DIR is private.
  process.umask(0o077);
  await prepareDataDir(config.dataDir);
  installTemporalRuntime(logger);
  // Without its embedded Postgres or dev server the service can do nothing: it stops, in order (exit 1).
  const lost = (why: string) => {
    logger.fatal(why);
    life.request(why, 1);
  };

  let databaseUrl = config.databaseUrl;
  let embeddedPg: EmbeddedPostgresHandle | undefined;
  if (!databaseUrl) {
    const port = config.embeddedPostgresPort;
    embeddedPg = await startEmbeddedPostgres({
      dataDir: path.join(config.dataDir, 'postgres'),
      port,
      database: 'workflow_alterations',
      logger,
      onUnexpectedExit: lost,
    });
    databaseUrl = embeddedPg.url;
    life.add('embedded Postgres', () => embeddedPg!.stop());
    logger.info({ port }, 'embedded Postgres started');
  }
  // Two budgets: the worker never takes the API's last connection, nor the API the worker's. The
  // start-up steps use the API's pool (or the worker's, in a worker-only process).
  const { apiPoolSize, workerPoolSize, apiStatementTimeoutMs } = config.database;
  const apiPool = role !== 'worker'
    ? createPool(databaseUrl, { max: apiPoolSize, acquireTimeoutMs: 5_000, statementTimeoutMs: apiStatementTimeoutMs, applicationName: 'workflow-alterations-api' })
    : undefined;
  const workerPool = role !== 'api' ? createPool(databaseUrl, { max: workerPoolSize, applicationName: 'workflow-alterations-worker' }) : undefined;
  if (apiPool) life.add('API database pool', () => apiPool.end());
  if (workerPool) life.add('worker database pool', () => workerPool.end());
  const pool = (apiPool ?? workerPool)!;
  await migrate(pool, logger);

  let devServer: TestWorkflowEnvironment | undefined;
  let connection: Connection;
  let nativeConnection: NativeConnection;
  if (config.temporal.address) {
    connection = await Connection.connect({ address: config.temporal.address });
    life.add('Temporal connection', () => connection.close());
    nativeConnection = await NativeConnection.connect({ address: config.temporal.address });
    life.add('Temporal worker connection', () => nativeConnection.close());
  } else {
    devServer = await startDevServer({
      cliPath: config.temporal.cliPath,
      dbFilename: path.join(config.dataDir, 'temporal.sqlite'),
      namespace: config.temporal.namespace,
      port: config.temporalDevServerPort,
      uiPort: config.temporal.uiPort,
      onUnexpectedExit: lost,
    });
    connection = devServer.connection;
    nativeConnection = devServer.nativeConnection;
    life.add('Temporal dev server', () => devServer!.teardown());
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
  if (role !== 'api') {
    const running = await createWorker({
      connection: nativeConnection,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      deps: {
        pool: workerPool!,
        definitions,
        logger,
        cipher,
        dispatcher: temporalDispatcher(temporal, config.temporal.taskQueue),
        outbound: { allowNetworks: config.outboundAllowNetworks },
      },
      maxConcurrentActivities: workerPoolSize,
    });
    worker = running;
    const workerRun = running.run();
    // A worker that died leaves an API that accepts work nobody does: the whole process stops (exit 1).
    workerRun.catch((err: unknown) => {
      logger.fatal({ err }, 'worker stopped with an error');
      life.request('worker failed', 1);
    });
    life.add('worker', async () => {
      if (running.getState() === 'RUNNING') running.shutdown();
      await workerRun.catch(() => undefined);
    });
    await startPendingPlans(workerPool!, temporal, { taskQueue: config.temporal.taskQueue, ...config.alterations }, logger);
  }

  let server: ReturnType<typeof serve> | undefined;
  if (role !== 'worker') {
    const app = createApp({
      config,
      pool: apiPool!,
      temporal,
      dispatcher: temporalDispatcher(temporal, config.temporal.taskQueue),
      definitions,
      cipher,
      logger,
      adminApiKeyHash: config.adminApiKey ? hashApiKey(config.adminApiKey) : undefined,
      tokens,
    });
    server = serveApi(app, { port: config.port });
    const listening = server;
    life.add('API server', () => closeServer(listening));
    // Listening before the banner says so (a port taken since the check fails the start here).
    await new Promise<void>((resolve, reject) => {
      if (listening.listening) resolve();
      listening.once('listening', () => resolve());
      listening.once('error', reject);
    });
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
}

/** The ports this start listens on, with the setting that moves each. */
function portsOf(role: Role, config: Config): PortUse[] {
  const uses: PortUse[] = [];
  if (role !== 'worker') uses.push({ port: config.port, variable: 'PORT' });
  if (!config.databaseUrl) {
    uses.push({ port: config.embeddedPostgresPort, variable: 'EMBEDDED_POSTGRES_PORT', host: '127.0.0.1', alternative: 'or DATABASE_URL to a Postgres of your own' });
  }
  if (!config.temporal.address) {
    uses.push({ port: config.temporalDevServerPort, variable: 'TEMPORAL_DEV_SERVER_PORT', host: '127.0.0.1', alternative: 'or TEMPORAL_ADDRESS to a running Temporal' });
    uses.push({ port: config.temporal.uiPort, variable: 'TEMPORAL_UI_PORT', host: '127.0.0.1', alternative: 'or 0 for no Web UI' });
  }
  return uses;
}

/** Stops accepting, lets in-flight requests finish, then closes the idle keep-alive connections. */
function closeServer(server: ReturnType<typeof serve>): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const http = server as { closeIdleConnections?: () => void };
  http.closeIdleConnections?.();
  // Connections that finish their request meanwhile become idle: close them as they do.
  const sweep = setInterval(() => http.closeIdleConnections?.(), 100);
  return closed.finally(() => clearInterval(sweep));
}

function describe(err: unknown): string {
  if (err instanceof ConfigError || err instanceof PortInUseError) return err.message;
  if (!(err instanceof Error)) return String(err);
  return `${err.message}${err.cause ? `\n  cause: ${String((err.cause as Error).message ?? err.cause)}` : ''}`;
}

void main();
