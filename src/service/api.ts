import type { ServerType } from '@hono/node-server';
import type pg from 'pg';
import { createApp } from '../api/app.js';
import type { AppDeps } from '../api/context.js';
import { createProbeApp } from '../api/probe-app.js';
import { serveApi } from '../api/server.js';
import { PlanStatusListener } from '../alterations/status-listener.js';
import { hashApiKey } from '../auth/api-keys.js';
import { consoleSurface } from '../console/surface.js';
import { startIdentityPurge } from '../auth/purge.js';
import { createPool } from '../db/pool.js';
import type { PostgresConnection } from '../db/postgres-connection.js';
import type { Config } from '../config.js';
import type { StopRegistry } from './types.js';

/** What the API of a process is built from: the app's dependencies, less what the API role makes itself. */
export type ApiDeps = Omit<AppDeps, 'pool' | 'adminApiKeyHash' | 'planStatus' | 'shutdown' | 'config'> & {
  config: Config;
};

/**
 * The API role: the identity purge, the plan status listener (one LISTEN connection), the app, and the
 * server on `config.port` unless `listen` is false. Event streams end first on a stop (registered last),
 * then the server waits for its requests.
 */
export async function startApi(
  deps: ApiDeps,
  o: { apiPool: pg.Pool; postgres: PostgresConnection; stops: StopRegistry; listen: boolean },
): Promise<{ app: ReturnType<typeof createApp>; server: ServerType | undefined }> {
  const { config, logger } = deps;
  o.stops.add('identity purge', startIdentityPurge(o.apiPool, logger, config.accessTokenLifetimeSeconds));
  const planStatus = new PlanStatusListener(o.postgres, logger);
  await planStatus.start();
  o.stops.add('plan status listener', () => planStatus.close());
  deps.metrics?.watchGovernedPlans(o.apiPool);
  const shutdown = new AbortController();
  const app = createApp({
    ...deps,
    pool: o.apiPool,
    adminApiKeyHash: config.adminApiKey ? hashApiKey(config.adminApiKey) : undefined,
    planStatus,
    shutdown: shutdown.signal,
    surfaces: [consoleSurface],
  });
  let server: ServerType | undefined;
  if (o.listen) {
    const listening = serveApi(app, { port: config.port, requestBodyTimeoutMs: config.requestBodyTimeoutMs });
    server = listening;
    o.stops.add('API server', () => closeServer(listening));
    // Listening before anyone is told so (a port taken since the check fails the start here).
    await listeningOn(listening);
  }
  // Registered last, so it runs first: open event streams end before the server waits for its requests.
  o.stops.add('event streams', async () => shutdown.abort());
  return { app, server };
}

/**
 * A worker-only process's METRICS_PORT listener: `/metrics` and the health probes, with one connection of
 * its own for the probes and the scrapes' credential checks (the worker's pool is sized to its slots, and a
 * busy worker must still answer rather than fail its readiness for a wait).
 */
export async function startProbeListener(
  deps: Omit<ApiDeps, 'shutdown'>,
  o: { databaseUrl: string; port: number; stops: StopRegistry },
): Promise<ServerType> {
  const probePool = createPool(o.databaseUrl, {
    max: 1,
    acquireTimeoutMs: 2_000,
    statementTimeoutMs: 2_000,
    idleInTransactionTimeoutMs: deps.config.database.idleInTransactionTimeoutMs,
    applicationName: 'workflow-alterations-probes',
  });
  o.stops.add('probes database pool', () => probePool.end());
  deps.metrics?.watchPool('probes', probePool);
  deps.metrics?.watchEngineBacklog(probePool);
  deps.metrics?.watchGovernedPlans(probePool);
  const probes = createProbeApp({
    ...deps,
    pool: probePool,
    adminApiKeyHash: deps.config.adminApiKey ? hashApiKey(deps.config.adminApiKey) : undefined,
  });
  const listening = serveApi(probes, { port: o.port, requestBodyTimeoutMs: deps.config.requestBodyTimeoutMs });
  o.stops.add('metrics listener', () => closeServer(listening));
  await listeningOn(listening);
  return listening;
}

function listeningOn(server: ServerType): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if ((server as { listening?: boolean }).listening) resolve();
    server.once('listening', () => resolve());
    server.once('error', reject);
  });
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
