import { existsSync } from 'node:fs';
import path from 'node:path';
import { Client, type Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type pg from 'pg';
import { workInFlight } from '../alterations/plans.js';
import type { Config } from '../config.js';
import { DEV_SERVER_PID_FILE, devServerDbOf } from '../embedded/leftovers.js';
import type { Logger } from '../logger.js';
import { cachedCliPath } from '../temporal/cli-binary.js';
import { connectTemporal } from '../temporal/connect.js';
import { devServerFairness, startDevServer } from '../temporal/devserver.js';
import { ensureSearchAttributes } from '../temporal/search-attributes.js';
import type { StopRegistry } from '../lifecycle.js';
import type { Tracing } from '../tracing.js';

/** Temporal as the service uses it, once it is up. */
export interface TemporalParts {
  address: string;
  connection: Connection;
  /** The worker's connection (the SDK's native client). */
  nativeConnection: NativeConnection;
  client: Client;
  /** The plan search attributes are registered (src/temporal/search-attributes.ts). */
  searchAttributes: boolean;
  /** Set when this start runs the dev server. */
  embedded?: string;
}

/**
 * Whether Temporal comes from a dev server whose binary must first be built with Go: no TEMPORAL_ADDRESS,
 * no TEMPORAL_CLI_PATH, and no CLI in the cache. Only then does a start take minutes.
 */
export function devServerNeedsBuild(config: Config): boolean {
  return !config.temporal.address && !config.temporal.cliPath && !existsSync(cachedCliPath(config.cacheDir));
}

/**
 * Connects to TEMPORAL_ADDRESS (with its TLS or API key), or starts the dev server (building its binary
 * first if needed), and registers the plan search attributes. Each part registers its stop as it starts.
 */
export async function startTemporal(
  config: Config,
  logger: Logger,
  stops: StopRegistry,
  lost: (why: string) => void,
  pool: pg.Pool,
  tracing: Tracing | undefined,
  build?: { signal?: AbortSignal; progress?: NodeJS.WritableStream & { isTTY?: boolean } },
): Promise<TemporalParts> {
  let address = config.temporal.address;
  let connection: Connection;
  let nativeConnection: NativeConnection;
  let embedded: string | undefined;
  if (address) {
    // TEMPORAL_TLS… and TEMPORAL_API_KEY apply to both (and so to everything the service asks Temporal).
    ({ connection, nativeConnection } = await connectTemporal({
      address,
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
      ...(build ? { build } : {}),
    });
    stops.add('Temporal dev server', () => devServer.teardown());
    connection = devServer.connection;
    nativeConnection = devServer.nativeConnection;
    address = devServer.address;
    embedded = devServer.address;
  }
  const { namespace } = config.temporal;
  const client = new Client({ connection, namespace, interceptors: tracing?.clientInterceptors });
  const searchAttributes = await ensureSearchAttributes(connection, namespace, logger);
  return { address, connection, nativeConnection, client, searchAttributes, ...(embedded ? { embedded } : {}) };
}
