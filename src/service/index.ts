import { prepareDataDir } from '../embedded/data-dir.js';
import { DefinitionCache } from '../engine/definitions.js';
import { Stops } from '../lifecycle.js';
import { createLogger, type Logger } from '../logger.js';
import { createServiceMetrics } from '../metrics/service-metrics.js';
import { TemporalLink } from '../temporal/link.js';
import { type PlanProcessing, startPendingPlans } from '../temporal/plans.js';
import { installTemporalRuntime } from '../temporal/runtime.js';
import { startTracing } from '../tracing.js';
import type { Config } from '../config.js';
import { type ApiDeps, startApi, startProbeListener } from './api.js';
import { prepareSecrets } from './identity.js';
import { startDatabases } from './postgres.js';
import { devServerNeedsBuild, startTemporal, type TemporalParts } from './temporal.js';
import type { Role, Service, ServiceOverrides, StopRegistry } from './types.js';
import { createWorkerRole, type WorkerRole } from './workers.js';

export type { Role, Service, ServiceOverrides, StopRegistry } from './types.js';

/** What the start says while the dev server's binary is built: where the minutes go, and what works meanwhile. */
const BUILDING =
  "the dev server's binary is being built with Go (once per machine; about 4 minutes on 2 cores, longer on a busy one)";

/** stderr as a build's progress sees it when it is not the only thing writing: whole lines, no ticker. */
const plainLines = {
  isTTY: false,
  write: (text: string) => process.stderr.write(text),
} as unknown as NodeJS.WritableStream & { isTTY: boolean };

/**
 * Builds and starts the service from its configuration, by role (each in its own file of this folder):
 * Postgres and migrations (src/service/postgres.ts), keys and first principals (identity.ts), Temporal
 * (temporal.ts: TEMPORAL_ADDRESS, or a dev server), the worker side (workers.ts) and the API (api.ts), as
 * `role` asks. `npm start`, `start:api`/`start:worker`, the tests and the benchmark all start it here.
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
  // The data folder holds what the service keeps itself: the embedded stores and a generated signing key.
  if (!config.databaseUrl || !config.temporal.address || !config.authSigningKey) await prepareDataDir(config.dataDir);
  const db = await startDatabases(config, role, logger, stops, lost, metrics, o.onPool);
  const secrets = await prepareSecrets(config, role, db.pool, logger, o.clock);
  const definitions = new DefinitionCache();
  // The search attributes are known once Temporal is up; the plans submitted before then start with it.
  const planProcessing: PlanProcessing = { taskQueue: config.temporal.taskQueue, ...config.alterations };

  // Temporal, and the worker on it. Before the API answers, unless the caller lets its embedded dev server start
  // in the background (`npm start`): the API answers as soon as Postgres does, whether the dev server's binary
  // must first be built with Go (minutes, on a new machine) or is cached (seconds, more on a loaded machine).
  const background = o.temporalInBackground === true && !config.temporal.address;
  const building = background && devServerNeedsBuild(config);
  const link = new TemporalLink({ why: building ? BUILDING : 'it is starting' });
  const embedded: Service['embedded'] = {
    ...(db.embeddedDataDir ? { postgresDataDir: db.embeddedDataDir } : {}),
    ...(building ? { temporalBuilding: true } : {}),
    ...(background && !building ? { temporalStarting: true } : {}),
  };
  let parts: TemporalParts | undefined;
  let workers: WorkerRole | undefined;
  const abortBuild = new AbortController();
  const engine = (async () => {
    parts = await startTemporal(config, logger, stops, lost, db.pool, tracing, {
      signal: abortBuild.signal,
      // In the background the progress is plain lines: a ticker rewriting its line would mangle the logs.
      ...(background ? { progress: plainLines } : {}),
    });
    planProcessing.searchAttributes = parts.searchAttributes;
    if (parts.embedded) embedded.temporal = parts.embedded;
    if (db.workerPool) {
      workers = createWorkerRole({
        config,
        logger,
        stops,
        postgres: db.postgres,
        workerPool: db.workerPool,
        backlogPool: db.apiPool,
        temporal: parts,
        definitions,
        cipher: secrets.cipher,
        metrics,
        tracing,
        workflowBundlePath: o.workflowBundlePath,
        workerOptions: o.workerOptions,
        recordUndo: o.recordUndo,
        eagerStartsStopWaitMs: o.eagerStartsStopWaitMs,
        onLost: o.onLost,
      });
      stops.add('worker', () => workers!.stop());
      // Plans submitted to this process start on its own worker (eager start), while that worker runs.
      planProcessing.withEagerClient = workers.withEagerClient;
      if (o.startWorker !== false) {
        await workers.start();
        await startPendingPlans(db.workerPool, parts.client, planProcessing, logger);
      }
    }
    link.connected(parts.client);
  })();
  if (background) {
    stops.add('Temporal build', async () => abortBuild.abort());
    engine.then(
      () => logger.info({ temporal: parts?.address }, 'Temporal is up: plans and instances run from here on'),
      (err: unknown) => {
        if (abortBuild.signal.aborted) return;
        logger.error({ err }, 'Temporal did not start');
        // The reason is the error's own sentence ("The Temporal dev server did not start (…); set …"), said once.
        lost(err instanceof Error ? err.message : `Temporal did not start: ${String(err)}`);
      },
    );
  } else await engine;

  const apiDeps: ApiDeps = {
    config,
    temporal: link,
    definitions,
    cipher: secrets.cipher,
    logger,
    tokens: secrets.tokens,
    planProcessing,
    planEventPollMs: o.planEventPollMs,
    auditTrail: o.auditTrail,
    metrics,
    workerRunning: db.workerPool ? () => workers?.running() ?? false : undefined,
    tracer: tracing?.tracer,
  };
  const api = db.apiPool
    ? await startApi(apiDeps, { apiPool: db.apiPool, postgres: db.postgres, stops, listen: o.listen !== false })
    : undefined;
  // A worker-only process has no API port: METRICS_PORT serves its metrics and health probes, if set.
  const metricsServer =
    role === 'worker' && config.metrics.port !== undefined && o.listen !== false
      ? await startProbeListener(apiDeps, { databaseUrl: db.databaseUrl, port: config.metrics.port, stops })
      : undefined;

  return {
    config,
    role,
    logger,
    pool: db.pool,
    apiPool: db.apiPool,
    workerPool: db.workerPool,
    databaseUrl: db.databaseUrl,
    get temporalAddress() {
      return parts?.address ?? '';
    },
    get client() {
      return link.client();
    },
    temporal: link,
    engineReady: engine,
    definitions,
    tokens: secrets.tokens,
    app: api?.app,
    server: api?.server,
    metrics,
    metricsServer,
    embedded,
    generatedKey: secrets.generatedKey,
    generatedPassword: secrets.generatedPassword,
    get worker() {
      return workers?.main;
    },
    get workers() {
      return workers;
    },
    startWorker: async () => {
      if (!workers) throw new Error(`a ${role} service runs no worker, or Temporal is not up yet`);
      await workers.start();
    },
    stopWorker: async () => {
      await workers?.stop();
    },
    stop: async () => {
      await own?.run();
    },
  };
}
